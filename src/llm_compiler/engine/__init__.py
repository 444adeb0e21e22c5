"""The engine: the workflow's steps and what they delegate to.

- :mod:`.workflow`: the steps (plan, review, schedule, execute, join), each short.
- :mod:`.planner`: streams a plan through the dialect's parser and publishes tasks.
- :mod:`.scheduler`: the pure core that admits tasks, resolves ``$n`` and decides what runs,
  as the fold of the run's journal of facts.
- :mod:`.dispatch`: the events the steps emit, made from the facts; each call's arguments
  validated, once, as it is dispatched.
- :mod:`.executor`: one tool call; every failure becomes an observation.
- :mod:`.state`: the run's typed state; :mod:`.summary`: the typed run summary.
- :mod:`.runs`: which runs are live (cancellation, superseded runs); each run's tool set.
- :mod:`.llm`: one streaming helper for planner and joiner calls.

The engine builds on :mod:`llm_compiler.dialects` (the protocol, the records prompts are
made of, and the default dialect); no dialect imports the engine.
"""

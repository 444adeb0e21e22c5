"""The event a durable run's stream gets where it was resumed after a crash or release."""

from __future__ import annotations

from workflows.events import Event


class RunResumed(Event):
    """A worker took the run up again; what follows was produced after the resume.

    Written by the server (not the engine) into the run's stored stream, once per resume.
    """

    worker: str
    """The executor id of the worker that resumed the run."""
    after_sequence: int
    """The stream sequence of the last event before the resume (-1: none)."""

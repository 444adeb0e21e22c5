# Everything installs itself: `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# Re-install when the pins or the project metadata change.
STAMP       := $(VENV)/.stamp-core
LOCAL_STAMP := $(VENV)/.stamp-local
# LangGraph for the durable benchmark's comparison, apart from the project's dependencies.
LG_VENV  := .venv-langgraph
LG_STAMP := $(LG_VENV)/.stamp

# A variable's text as typed, for inside single quotes: $(value) keeps make from expanding
# it and each ' becomes '\'' (so `make demo Q="What's 2 + 2?"` reaches the demo intact).
sh_quote = $(subst ','\'',$(value $(1)))

.PHONY: bench-langgraph-venv bench-model install install-local install-browser install-postgres install-systemd test test-fast chaos fuzz demo demo-mcp eval bench serve-llm serve lint format docs docs-serve clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements.lock
	$(PIP) install --no-deps -e .
	touch $@

# The embedded local model: llama.cpp's OpenAI-compatible server and Gemma 3 270M. The
# server is built from source once per flag set (portable by default: no AVX-512, no AMX;
# LLM_COMPILER_LLAMA_BUILD=native|baseline or LLM_COMPILER_CMAKE_ARGS choose others) into a
# wheel cache keyed by those flags (~/.cache/llm-compiler/wheels; pip's own cache is never
# used for it), installed, then checked by completing a few tokens; a build whose server
# dies is named, and replaced once by a safer one (llm_compiler/models/build.py).
$(LOCAL_STAMP): $(STAMP) requirements-local.lock src/llm_compiler/models/build.py
	$(BIN)/python -m llm_compiler.models.build --no-check
	$(PIP) install -r requirements-local.lock
	$(BIN)/python -m llm_compiler.models.build
	touch $@

$(LG_STAMP): benchmarks/langgraph-requirements.txt
	test -x $(LG_VENV)/bin/python || $(PYTHON) -m venv $(LG_VENV)
	$(LG_VENV)/bin/python -m pip --disable-pip-version-check -q install -r $<
	touch $@

install: $(STAMP)

install-local: $(LOCAL_STAMP)

## Run the whole test suite, the real local model included. If the local model cannot be
## installed here, its tests are skipped with the reason (the rest still runs).
test: install
	@$(MAKE) --no-print-directory install-local || \
		echo "WARNING: the embedded model could not be installed; its tests will be skipped."
	@$(MAKE) --no-print-directory install-browser
	@$(MAKE) --no-print-directory install-postgres
	@$(MAKE) --no-print-directory install-systemd
	@$(MAKE) --no-print-directory docs
	$(BIN)/python -m pytest -q -rs

## The suite without the real model (about 3 minutes on a shared 2-core machine).
test-fast: install
	$(BIN)/python -m pytest -q -m "not llm"

## Durable runs under faults, CHAOS_RUNS times (10 by default), each with a new random seed
## (printed; LLMC_CHAOS_SEED=<seed> replays one) and CHAOS_ROUNDS faults (8 by default):
## the chaos test of real workers on one Postgres, and the ownership state machine.
CHAOS_RUNS ?= 10
CHAOS_ROUNDS ?= 8
chaos: install
	@$(MAKE) --no-print-directory install-postgres
	@for i in $$(seq 1 $(CHAOS_RUNS)); do \
		echo "chaos run $$i of $(CHAOS_RUNS)"; \
		LLMC_CHAOS_ROUNDS=$(CHAOS_ROUNDS) LLMC_OWNERSHIP_STEPS=40 $(BIN)/python -m pytest -q -s \
			-p no:cacheprovider tests/durable/test_chaos.py tests/durable/test_ownership_machine.py \
			|| exit 1; \
	done

## The property tests (tests/*/test_*_properties.py) with many more examples and random seeds (FUZZ_EXAMPLES per
## property, 10000 by default; `make test` runs a few with fixed seeds).
fuzz: install
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q -p no:cacheprovider --timeout 0 $$(find tests -name 'test_*_properties.py')

## Answer a question with parallel tools on the embedded model (or OpenAI if OPENAI_API_KEY is
## set, or any OpenAI-compatible server if LLM_COMPILER_API_BASE is set).
## DIALECT=coa answers with Chain-of-Abstraction instead of LLMCompiler plans.
demo: install
	@if [ -z "$$OPENAI_API_KEY$$LLM_COMPILER_API_BASE" ]; then \
		$(MAKE) --no-print-directory install-local; fi
	DEMO_QUESTION='$(call sh_quote,Q)' DIALECT='$(call sh_quote,DIALECT)' $(BIN)/python examples/demo.py

## The same kind of question over tools from an MCP server (the demo tools served by the
## official MCP SDK in a subprocess; HTTP=1 serves them over streamable HTTP on loopback).
demo-mcp: install
	@if [ -z "$$OPENAI_API_KEY$$LLM_COMPILER_API_BASE" ]; then \
		$(MAKE) --no-print-directory install-local; fi
	$(BIN)/python examples/mcp_tools.py $(if $(HTTP),--http) -- '$(call sh_quote,Q)'

## Plan correctness on BFCL's parallel items (text plans vs. a plain prompt; the bfcl-eval
## wheel is downloaded once into .cache/bfcl, never installed), plans for questions on
## small tool sets of a user's own (evals/own_tools.py), then end-to-end answers on the
## demo tools and a second tool set (evals/answers.py), then the fresh held-out questions on
## three more tool sets (evals/fresh.py). Same model choice as `demo`.
## More items: make eval EVAL_ARGS="--sample 80"
eval: install
	@if [ -z "$$OPENAI_API_KEY$$LLM_COMPILER_API_BASE" ]; then \
		$(MAKE) --no-print-directory install-local; fi
	$(BIN)/python -m evals.bfcl $(EVAL_ARGS)
	$(BIN)/python -m evals.own_tools
	$(BIN)/python -m evals.answers
	$(BIN)/python -m evals.fresh

## The benchmarks; the durable one compares LangGraph's Postgres checkpointer on the same
## fan-out when .venv-langgraph installs (never fatal: without it that table is skipped).
bench: install
	@$(MAKE) --no-print-directory install-postgres
	@$(MAKE) --no-print-directory bench-langgraph-venv || \
		echo "WARNING: .venv-langgraph could not be installed; the LangGraph table will be skipped."
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.serving
	$(BIN)/python -m benchmarks.surfaces
	$(BIN)/python -m benchmarks.tracing
	$(BIN)/python -m benchmarks.durable
	$(BIN)/python -m benchmarks.policies
	$(BIN)/python -m benchmarks.engine_cpu
	$(BIN)/python -m benchmarks.plan_cache
	$(BIN)/python -m benchmarks.soak

## Headless Chromium for the live page's browser test (Debian's package; CI runs as root).
## Never fatal: without it the browser test is skipped with the reason.
install-browser:
	@command -v chromium >/dev/null 2>&1 || \
		(apt-get update -qq && apt-get install -y -qq chromium fonts-liberation) || \
		echo "WARNING: chromium could not be installed; the browser test will be skipped."

## Debian's PostgreSQL binaries for the durable-run tests and benchmarks (they start their own
## throwaway cluster in a temporary folder; no service is enabled). Never fatal: without them
## those tests are skipped with the reason.
install-postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends postgresql) || \
		echo "WARNING: postgresql could not be installed; the durable-run tests will be skipped."

## Debian's systemd package for `systemd-analyze verify` of the deploy's unit file (nothing is
## enabled or started). Never fatal: without it that check is skipped with the reason.
install-systemd:
	@command -v systemd-analyze >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends systemd) || \
		echo "WARNING: systemd could not be installed; the unit file check will be skipped."

## LangGraph and its Postgres checkpointer in .venv-langgraph (benchmarks/langgraph_pg.py).
bench-langgraph-venv: $(LG_STAMP)

## The embedded model server's own speed (prompt and generation tokens/s, first task,
## answer) on the installed llama.cpp build: benchmarks/results/model_speed.json; the plan
## cache on the embedded model: benchmarks/results/plan_cache_embedded.json; cold and warm
## first task and answer for three questions in a row: benchmarks/results/warm_prompt.json
## (BASE=<another checkout> interleaves its code).
bench-model: install install-local
	$(BIN)/python -m benchmarks.model_speed
	$(BIN)/python -m benchmarks.plan_cache_embedded
	$(BIN)/python -m benchmarks.warm_prompt $(if $(BASE),--base $(BASE))

## The live plan page and HTTP API on http://127.0.0.1:8000 (ARGS="--port 9000 --store sqlite:///runs.db").
serve: install
	@if [ -z "$$OPENAI_API_KEY$$LLM_COMPILER_API_BASE" ]; then \
		$(MAKE) --no-print-directory install-local; fi
	$(BIN)/llm-compiler serve $(ARGS)

serve-llm: install install-local
	$(BIN)/python -m llm_compiler.models

lint: install
	$(BIN)/python -m ruff check src tests examples benchmarks evals docs/hooks.py
	$(BIN)/python -m ruff format --check src tests examples benchmarks evals docs/hooks.py
	$(BIN)/python -m mypy

format: install
	$(BIN)/python -m ruff check --fix src tests examples benchmarks evals docs/hooks.py
	$(BIN)/python -m ruff format src tests examples benchmarks evals docs/hooks.py

## The documentation site (mkdocs-material, docs/ and mkdocs.yml) built into site/; strict: a
## broken link or anchor, a page left out of the nav or a docstring the API reference cannot
## read fails it. `make test` builds it too.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet

## The documentation site on http://127.0.0.1:8001, rebuilt on every change (DOCS_PORT=...).
DOCS_PORT ?= 8001
docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve --strict -a 127.0.0.1:$(DOCS_PORT)

clean:
	rm -rf $(VENV) $(LG_VENV) .pytest_cache .ruff_cache site

# flink-agents-py developer entry points.
#   make setup        create .venv and install everything (scripts/setup.sh)
#   make run ARGS=..  run the review-analysis job
#   make quick        a first run in about a minute: 20 reviews, the small bundled model
#   make test         full test suite (PYTEST_ARGS=... to pass options)
#   make test-fast    tests without the flink/model/kafka markers
#   make bench        quick benchmark
#   make kafka        a local Kafka broker at 127.0.0.1:9092 for the Kafka examples
#                     (the jars setup fetched; Ctrl-C stops it; ARGS="--port N --topics a,b")
#   make lint         the style gates: ruff (Google docstrings), mypy (strict on
#                     api, plan, runtime) and vulture (unused code:
#                     scripts/unused_code.py); CI runs it before the tests
# setup re-runs only when pyproject.toml or scripts/setup.sh change, or .venv is
# gone; force it with `make -B setup` (e.g. after a FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1 run).

PY      := .venv/bin/python
STAMP   := .venv/.setup-done
ARGS    ?=
PYTEST_ARGS ?=
LINT_PATHS  := flink_agents_py jobs bench examples scripts tests

.PHONY: setup run quick test test-fast bench kafka lint

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh scripts/fetch_jars.sh scripts/fetch_model.py
	bash scripts/setup.sh
	touch $@

run: $(STAMP)
	$(PY) -m jobs.review_analysis $(ARGS)

quick: $(STAMP)
	$(PY) -m jobs.review_analysis --quick $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not flink and not model and not kafka" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench --quick

kafka: $(STAMP)
	$(PY) scripts/kafka_broker.py $(ARGS)

# every gate runs, so one log shows every finding; fails when any reports one
lint: $(STAMP)
	@rc=0; \
	echo "ruff check $(LINT_PATHS)"; .venv/bin/ruff check --output-format concise $(LINT_PATHS) || rc=1; \
	echo "mypy flink_agents_py jobs (strict on api/plan/runtime)"; .venv/bin/mypy || rc=1; \
	echo "vulture flink_agents_py jobs (unused code; scripts/unused_code.py)"; \
	$(PY) scripts/unused_code.py || rc=1; \
	exit $$rc

# flink-agents-py developer entry points.
#   make setup        create .venv and install everything (scripts/setup.sh)
#   make run ARGS=..  run the review-analysis job
#   make test         full test suite (PYTEST_ARGS=... to pass options)
#   make test-fast    tests without the flink/model/kafka markers
#   make bench        quick benchmark
# setup re-runs only when pyproject.toml or scripts/setup.sh change, or .venv is
# gone; force it with `make -B setup` (e.g. after a FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1 run).

PY      := .venv/bin/python
STAMP   := .venv/.setup-done
ARGS    ?=
PYTEST_ARGS ?=

.PHONY: setup run test test-fast bench

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh scripts/fetch_jars.sh scripts/fetch_model.py
	bash scripts/setup.sh
	touch $@

run: $(STAMP)
	$(PY) -m jobs.review_analysis $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not flink and not model and not kafka" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench --quick

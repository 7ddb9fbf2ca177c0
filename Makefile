# Meridian: `make run` starts the embedded product, `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Keyed on what installs: the pinned requirements and the project itself (the `meridian` command).
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test test-deps venv bench check messages clean

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -q --no-deps -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

## Start Meridian on http://127.0.0.1:$${PORT:-8000} with the demo fleet (Ctrl-C stops).
run: venv
	$(PY) manage.py meridian_run

## Run the whole test suite (PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set).
test: test-deps
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest --durations=40 $(PYTEST_ARGS)

## What the suite needs beyond Python: Debian's chromium and nginx, the OpenID Connect provider.
## (CI installs it once, then runs two `make test` side by side; lint-imports keeps no cache
## for the same reason.)
test-deps: venv
	@bash scripts/ensure_debian_tools.sh
	@bash scripts/ensure_node_tools.sh

## Benchmarks: print figures and ratios (not tests).
bench: venv
	@for script in bench/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

check: venv
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

## Recompile translations after editing locale/*/LC_MESSAGES/django.po.
messages: venv
	$(PY) manage.py makemessages -l zh_Hans --ignore ".venv/*" --ignore "var/*" --ignore "tests/*"
	$(PY) scripts/translate_zh.py
	$(PY) manage.py compilemessages -l zh_Hans --ignore ".venv/*"

clean:
	rm -rf $(VENV) var

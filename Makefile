# The two commands of the README. Each sets up what it needs first.
#   make run   a coordinator on 127.0.0.1:7600 (store in ./.allot/) and an agent for this host
#   make test  ruff, mypy and pytest, with a Docker engine and the local test image

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: run test provision check clean

$(INSTALLED): pyproject.toml
	@$(PYTHON) -m venv $(VENV) || { echo "make: '$(PYTHON) -m venv' failed; on Debian: apt-get install -y python3-venv" >&2; exit 1; }
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,plot]'
	@touch $@

run: $(INSTALLED)
	@scripts/run-local

# provision first: it starts the VM image's build in the background, to run beside the rest.
test: provision $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy coordinator agent shared client allotctl tests
	$(BIN)/pytest

provision:
	@if [ "$$ALLOT_SKIP_DOCKER_TESTS" = 1 ]; then echo "make: ALLOT_SKIP_DOCKER_TESTS=1: Docker tests will be skipped" >&2; else scripts/provision; fi

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build *.egg-info

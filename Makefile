# One task runner for people and CI alike.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean k8s-bins

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/orders.py

lint: $(STAMP)
	$(BIN)/ruff check runtime operator tests examples bench
	$(BIN)/ruff format --check runtime operator tests examples bench
	$(BIN)/lint-imports --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy
	MYPYPATH=runtime $(BIN)/mypy --strict examples  # user code type-checks against the SDK
	$(BIN)/pytest -q -p no:cacheprovider tests/typing  # pass_*/fail_* files under mypy --strict

unit: $(STAMP) k8s-bins
	$(BIN)/pytest -q

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/steps.py

k8s-bins:  # kube-apiserver, etcd and helm for tests/operator, cached outside the repo
	bash tools/build-k8s.sh

clean:
	rm -rf $(VENV) .wayline .pytest_cache .mypy_cache

# TideMQ — developer entry points. `make up` runs the system, `make test` tests it.
SHELL := /bin/bash
UV ?= uv
PY := $(UV) run --frozen python

.PHONY: help proto proto-check lint test test-fast sync
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

sync: ## install the locked environment (uv, every workspace member, dev tools)
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-packages

proto: sync ## regenerate gRPC code from shared/proto
	$(PY) -m grpc_tools.protoc -I shared/proto --python_out=shared --pyi_out=shared \
	  --grpc_python_out=shared shared/proto/tidemq/v1/*.proto

proto-check: proto ## fail if the committed generated code is stale
	@git diff --exit-code --stat -- shared/tidemq/v1 || \
	  (echo "generated protobuf code is stale: run 'make proto' and commit" >&2; exit 1)

lint: sync ## ruff
	$(UV) run --frozen ruff check .

test: sync proto-check lint ## the whole suite: unit, integration, e2e, compose (what CI runs)
	$(UV) run --frozen pytest $(PYTEST_ARGS)

test-fast: sync ## unit tests only
	$(UV) run --frozen pytest tests/unit $(PYTEST_ARGS)

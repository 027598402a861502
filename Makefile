# TideMQ — developer entry points. `make up` runs the system, `make test` tests it.
SHELL := /bin/bash
UV ?= uv
PY := $(UV) run --frozen python

.PHONY: proto proto-check lint test sync
sync:
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-packages

proto: sync
	$(PY) -m grpc_tools.protoc -I shared/proto --python_out=shared --pyi_out=shared \
	  --grpc_python_out=shared shared/proto/tidemq/v1/*.proto

proto-check: proto
	@git diff --exit-code --stat -- shared/tidemq/v1 || \
	  (echo "generated protobuf code is stale: run 'make proto' and commit" >&2; exit 1)

lint: sync
	$(UV) run --frozen ruff check .

test: sync
	$(UV) run --frozen pytest

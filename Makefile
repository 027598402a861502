# TideMQ — developer entry points. `make up` runs the system, `make test` tests it.
SHELL := /bin/bash
UV ?= uv
PY := $(UV) run --frozen python

.PHONY: help proto proto-check lint test test-fast sync node-deps
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

# Bytecode is written here, once: a shell with PYTHONDONTWRITEBYTECODE=1 never writes it, and then
# every process (each service and `tidemq` command a test starts) compiles every module it
# imports, most of its start-up CPU. Only what changed is compiled again (a second run: 0.5 s).
sync: ## install the locked environment (uv, every workspace member, dev tools), bytecode compiled
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-packages --compile-bytecode
	$(PY) -m compileall -q -j 0 */tidemq services/*/tidemq gateway/grpc-gateway/tidemq gateway/kafka-gateway/tidemq

NODE_CONFORMANCE := tests/integration/rocketmq/node tests/integration/kafka/node
node-deps: ## install the locked Node.js clients the tests drive: RocketMQ's official one, kafkajs (needs node + npm)
	@command -v npm >/dev/null || { echo "npm is not installed (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	for dir in $(NODE_CONFORMANCE); do npm ci --prefix $$dir --no-audit --no-fund || exit 1; done

proto: sync ## regenerate gRPC code from shared/proto
	$(PY) -m grpc_tools.protoc -I shared/proto --python_out=shared --pyi_out=shared \
	  --grpc_python_out=shared shared/proto/tidemq/v1/*.proto shared/proto/tidemq/etcd/*.proto

proto-check: proto ## fail if the committed generated code is stale
	@git diff --exit-code --stat -- shared/tidemq/v1 shared/tidemq/etcd || \
	  (echo "generated protobuf code is stale: run 'make proto' and commit" >&2; exit 1)

lint: sync ## ruff
	$(UV) run --frozen ruff check .

# pytest-xdist workers: most tests wait on the processes they start, so three share two cores;
# tests/conftest.py keeps each module on one worker and the JVM/Docker modules together.
TEST_WORKERS ?= 3
test: sync proto-check lint node-deps ## the whole suite: unit first, integration, e2e, compose (what CI runs; TEST_WORKERS=0: one process)
	$(UV) run --frozen pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

test-fast: sync ## unit tests only
	$(UV) run --frozen pytest tests/unit $(PYTEST_ARGS)

# --- deployment (deploy/, docs/deployment.md) ------------------------------------------------
.PHONY: up up-secure certs down status logs images compose-up compose-down
up: sync ## run the whole topology as supervised local processes; wait healthy; print URLs (REPLICAS=1: one broker per group; ETCD=single: one etcd member instead of three; OBSERVABILITY=1: + Prometheus; ANALYTICS=1: + Spark cluster)
	TIDEMQ_REPLICAS=$(REPLICAS) TIDEMQ_ETCD=$(ETCD) TIDEMQ_OBSERVABILITY=$(OBSERVABILITY) TIDEMQ_ANALYTICS=$(ANALYTICS) $(PY) -m deploy.local up

up-secure: sync ## `make up` with auth and TLS on every service (the secure profile, docs/security.md)
	TIDEMQ_REPLICAS=$(REPLICAS) TIDEMQ_ETCD=$(ETCD) $(PY) -m deploy.secure up

certs: sync ## a local CA and per-service TLS certificates in .data/certs (docs/security.md)
	$(PY) -m deploy.certs --out .data/certs

down: ## stop everything `make up` started (SIGTERM, graceful drain)
	@if [ -x .venv/bin/python ]; then .venv/bin/python -m deploy.local down; else echo "not running"; fi

status: ## supervisor status, a health probe of every service, each etcd member (leader, raft term and index, lag), the config centers (same REPLICAS=/ETCD= as up)
	@TIDEMQ_REPLICAS=$(REPLICAS) TIDEMQ_ETCD=$(ETCD) TIDEMQ_OBSERVABILITY=$(OBSERVABILITY) TIDEMQ_ANALYTICS=$(ANALYTICS) .venv/bin/python -m deploy.local status

logs: ## tail the service logs (one service: SERVICE=broker-a-0 make logs; SERVICE=broker-a: every replica of the group)
	@TIDEMQ_REPLICAS=$(REPLICAS) TIDEMQ_ETCD=$(ETCD) TIDEMQ_OBSERVABILITY=$(OBSERVABILITY) TIDEMQ_ANALYTICS=$(ANALYTICS) .venv/bin/python -m deploy.local logs $(SERVICE)

images: sync ## build every service image (no registry needed; see docs/deployment.md; ANALYTICS=1 OBSERVABILITY=1: and those profiles' images)
	TIDEMQ_OBSERVABILITY=$(OBSERVABILITY) TIDEMQ_ANALYTICS=$(ANALYTICS) $(PY) -m deploy.images

compose-up: sync ## the same topology under docker compose: build, up -d, wait healthy (OBSERVABILITY=1: + Prometheus, Grafana; ANALYTICS=1: + Spark cluster)
	TIDEMQ_OBSERVABILITY=$(OBSERVABILITY) TIDEMQ_ANALYTICS=$(ANALYTICS) $(PY) -m deploy.compose up

compose-down: ## docker-compose down (and stop a dockerd compose-up started)
	$(PY) -m deploy.compose down

# --- Kafka conformance (docs/kafka.md: kafka-python's suite, librdkafka's tests) -------------
.PHONY: kafka-conformance kafka-conformance-python kafka-conformance-librdkafka
kafka-conformance: kafka-conformance-python kafka-conformance-librdkafka ## both Kafka clients' own suites against gateway-kafka (below)

kafka-conformance-python: sync ## kafka-python 3.0.12's own integration suite (from its PyPI sdist) against a TideMQ cluster + gateway-kafka; expected failures in tests/integration/kafka/conformance/expected_failures.txt (PYTEST_ARGS=... passed on)
	$(PY) -m tests.integration.kafka.conformance.run $(PYTEST_ARGS)

kafka-conformance-librdkafka: sync ## librdkafka's own tests (a curated subset) against two gateway-kafka instances (needs npm, a C compiler, libssl-dev; KAFKA_CONFORMANCE_TESTS=0012,0030: some)
	$(PY) -m tests.conformance.librdkafka_suite

# --- benchmarks (bench/README.md) -----------------------------------------------------------
.PHONY: bench
bench: sync ## quick run of every benchmark, each printing its same-run baseline (a few minutes)
	$(PY) -m bench.store --quick
	$(PY) -m bench.compaction --quick
	$(PY) -m bench.replication --quick
	$(PY) -m bench.failover --quick
	$(PY) bench/e2e_latency/run.py --quick
	$(PY) bench/config/run.py --quick
	$(PY) bench/config/run.py --quick --members 1
	$(PY) bench/consumption/run.py --quick
	$(PY) bench/quota/run.py --quick
	$(PY) bench/schedule/run.py --quick
	$(PY) bench/filter/run.py --quick
	$(PY) bench/rocketmq_compat/run.py --quick
	$(PY) bench/kafka_compat/run.py --quick

# --- chaos (tests/chaos, docs/replication.md) ------------------------------------------------
.PHONY: chaos
RUNS ?= 10
FAULTS ?= 20
SEED ?= $(shell date +%s)
chaos: sync ## seeded fault schedules against a 3-replica group and its etcd control plane: RUNS runs of FAULTS faults from SEED
	CHAOS_RUNS=$(RUNS) CHAOS_FAULTS=$(FAULTS) CHAOS_SEED=$(SEED) \
	  $(UV) run --frozen pytest tests/chaos -s $(PYTEST_ARGS)

# --- soak (tests/soak.py, docs/consumption.md "Pop state over time") -------------------------
.PHONY: soak
DURATION ?= 3600
soak: sync ## pop/ack/nack/invisibility churn, retention and a compacted topic on a real cluster for DURATION s (an hour) from SEED: RSS, open files, pop state, data dir, compaction, a restart every 30 min (start-up time), slope checks after each process's warm-up
	$(PY) -m tests.soak --duration-s $(DURATION) --seed $(SEED) $(SOAK_ARGS)

# --- analytics (services/analytics, docs/analytics.md) ---------------------------------------
.PHONY: analytics
NAMESRV ?= 127.0.0.1:9876;127.0.0.1:9877
OUTPUT ?= .data/analytics/$(TOPIC)-tag-counts.csv
analytics: sync ## Spark batch job: per-tag counts of TOPIC into OUTPUT (CSV); NAMESRV=h:p TOPIC=t
	@test -n "$(TOPIC)" || { echo "usage: make analytics TOPIC=<topic> [NAMESRV=$(NAMESRV)] [OUTPUT=file.csv]" >&2; exit 2; }
	$(PY) -m tidemq.analytics.tag_counts --namesrv "$(NAMESRV)" --topic "$(TOPIC)" --output "$(OUTPUT)" --master "local[*]"

.PHONY: analytics-up analytics-submit analytics-cluster-test bench-analytics
analytics-up: ## = make up ANALYTICS=1: the deployment plus a supervised Spark master (spark://127.0.0.1:7077, UI :8090) + 2 workers
	$(MAKE) up ANALYTICS=1

JOB ?= tag_counts
analytics-submit: sync ## run a job on the `make up ANALYTICS=1` cluster: JOB=tag_counts|revenue|sessions|relay ARGS='--topic t --output f.csv ...'
	SPARK_LOCAL_IP=127.0.0.1 $(PY) -m tidemq.analytics.$(JOB) --master spark://127.0.0.1:7077 --namesrv "$(NAMESRV)" $(ARGS)

analytics-cluster-test: sync ## the standalone-cluster test: master + 2 workers + a job through the submitter (five JVMs)
	$(UV) run --frozen pytest tests/integration/analytics/test_standalone.py $(PYTEST_ARGS)

bench-analytics: sync ## Spark read throughput (TideMQ vs Parquet) and streaming latency, quick
	$(PY) bench/analytics/run.py --quick

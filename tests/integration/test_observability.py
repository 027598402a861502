"""Prometheus against a real cluster: every dashboard panel's query returns data.

Real processes: Redis, config center, two name servers (replication controller), broker-a,
a two-replica group broker-r, the HTTP gateway, the trace collector, and Debian's
`prometheus` scraping them every second with the scrape configuration rendered by
deploy.observability and the alert rules of observability/alerts.yml. Traffic: a topic over
both groups, sends and fetches through the gateway, one failing request, and a push consumer
group that commits offsets. Then each PromQL expression of every dashboard is asked through
Prometheus's HTTP API until it returns a series (deadline), so a renamed metric, a wrong label
or a panel nothing feeds fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
import requests
import yaml
from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer

from deploy.observability import (
    ALERTS_FILE,
    dashboard_files,
    dashboard_queries,
    job_name,
    prometheus_argv,
    scrape_config,
)
from tests.support.cluster import process_group, start_cluster, start_replica_group
from tests.support.etcd import start_etcd
from tests.support.processes import free_port, start_redis, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "obs-orders"
GROUP = "obs-billing"
PROMETHEUS = shutil.which("prometheus")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if PROMETHEUS is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the Prometheus test: `apt-get install prometheus`")
        pytest.skip("prometheus is not installed (Debian: apt-get install prometheus)")
    tmp = tmp_path_factory.mktemp("observability")
    etcd, redis = start_etcd(tmp), start_redis(tmp)
    try:
        with process_group(tmp) as start:
            collector = start("tidemq.tracecollector", ["--http-port", "0"])
            cluster = start_cluster(start, etcd, redis, broker_names=("broker-a",),
                                    otlp_endpoint=collector.addr, controller=True)
            group = start_replica_group(start, cluster, "broker-r", replicas=2, min_in_sync=1)
            group.wait_master()
            cluster.start_gateway(workers=1)
            services = {"config-center": cluster.config_center, "trace-collector": collector,
                        "gateway-http": cluster.gateway, **cluster.brokers,
                        **{f"namesrv-{i}": n for i, n in enumerate(cluster.namesrvs, 1)},
                        **{f"broker-r-{r}": p for r, p in enumerate(group.replicas)}}
            with running_prometheus(tmp, services) as url:
                cluster.extra.update(prometheus=url, targets=len(services))
                yield cluster
    finally:
        redis.kill()
        etcd.kill()


class running_prometheus:
    """Debian's prometheus with the rendered configuration (1 s scrapes), killed by its PID."""

    def __init__(self, tmp, services: dict) -> None:
        jobs: dict[str, list[tuple[str, str]]] = {}
        for name, process in services.items():
            jobs.setdefault(job_name(process.module), []).append(
                (name, f"127.0.0.1:{process.metrics_port}"))
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(
            scrape_config(jobs, interval="1s", rule_files=[str(ALERTS_FILE)]), sort_keys=False))
        self.port = free_port()
        self.argv = prometheus_argv(config_file=str(self.config), data_dir=str(tmp / "tsdb"),
                                    listen=f"127.0.0.1:{self.port}", binary=PROMETHEUS)
        self.log = tmp / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> str:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{self.port}"

        def ready() -> bool:
            assert self.proc.poll() is None, f"prometheus exited:\n{self.log.read_text()}"
            try:
                return requests.get(f"{url}/-/ready", timeout=2).status_code == 200
            except requests.ConnectionError:
                return False

        wait_until(ready, 60, interval=0.2, message="prometheus to be ready")
        return url

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def query(prometheus: str, expr: str) -> list[dict]:
    reply = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
    assert reply.status_code == 200, f"{expr}: {reply.text}"
    return reply.json()["data"]["result"]


def traffic(cluster) -> None:
    """Sends and fetches through the gateway, one 404, and a push consumer committing."""
    url = cluster.gateway_url
    created = requests.post(f"{url}/v1/topics", json={"name": TOPIC, "queues": 2}, timeout=30)
    assert created.status_code in (201, 202), created.text

    def routed() -> bool:
        described = requests.get(f"{url}/v1/topics/{TOPIC}", timeout=10)
        return described.status_code == 200 and {
            b["broker_name"] for b in described.json()["brokers"]} == {"broker-a", "broker-r"}

    wait_until(routed, 60, interval=0.2, message=f"route of {TOPIC} on both groups")
    for batch in range(5):
        sent = requests.post(f"{url}/v1/topics/{TOPIC}/messages", timeout=30, json={
            "messages": [{"body": f"order-{batch}-{i}", "key": f"k{i}"} for i in range(20)]})
        assert sent.status_code == 201, sent.text
    fetched = requests.get(f"{url}/v1/topics/{TOPIC}/queues/broker-a/0/messages",
                           params={"offset": 0, "max": 10}, timeout=10)
    assert fetched.status_code == 200, fetched.text
    missing = requests.get(f"{url}/v1/topics/no-such-{uuid.uuid4().hex[:6]}", timeout=10)
    assert missing.status_code == 404, missing.text  # feeds the error panel


def test_every_dashboard_query_returns_data(stack, tmp_path):
    prometheus = stack.extra["prometheus"]
    traffic(stack)
    consumed: set[str] = set()

    def listener(messages):
        consumed.update(bytes(m.body) for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(stack.namesrv_addrs, GROUP, TOPIC, listener,
                            consume_from=ConsumeFrom.FIRST, session_timeout_ms=6000,
                            heartbeat_interval_ms=300, long_poll_s=1.0,
                            auto_commit_interval_s=0.2, offset_store_dir=tmp_path).start()
    try:
        wait_until(lambda: len(consumed) == 100, 60, interval=0.1, message="100 consumed")
        targets = stack.extra["targets"]
        wait_until(lambda: [r["value"][1] for r in query(prometheus, "up")] == ["1"] * targets,
                   60, interval=0.5, message=f"all {targets} scrape targets up")
        queries = [(d.name, title, expr) for d in dashboard_files()
                   for title, expr in dashboard_queries(d)]
        assert len(queries) >= 30
        # the group's lag is reported (by the masters) and falls to 0 once all is committed
        pending = [*queries, ("-", "lag of the test group",
                              f'sum(tidemq_broker_consumer_lag_messages{{group="{GROUP}"}}) == 0')]

        def all_answered() -> bool:
            pending[:] = [q for q in pending if not query(prometheus, q[2])]
            return not pending

        try:
            wait_until(all_answered, 90, interval=1.0, message="every panel query to have data")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; still without data: {pending}") from None
    finally:
        consumer.shutdown()


def test_prometheus_loaded_the_alert_rules(stack):
    prometheus = stack.extra["prometheus"]
    groups = requests.get(f"{prometheus}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert {"TideMQBrokerDown", "TideMQServiceDown", "TideMQConsumerLagGrowing",
            "TideMQDiskUsageHigh"} <= set(rules)

    def evaluated() -> bool:
        current = requests.get(f"{prometheus}/api/v1/rules", timeout=10).json()["data"]
        return all(r["health"] == "ok" for g in current["groups"] for r in g["rules"])

    wait_until(evaluated, 30, interval=0.5, message="every rule evaluated without error")

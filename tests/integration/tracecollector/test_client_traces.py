"""Issue 41, with real processes (config center, two name servers, one broker group, the trace
collector): a message sent with the `tidemq` command or the Python SDK is on the dashboard and
found by its msg id, with the client's publish span as the root of its trace and the broker's
store span under it; the command finds the collector through TIDEMQ_OTLP_ENDPOINT or through
the endpoint file `make up` writes; offset polls (`topic describe`, `group describe`, the
console's lag figures) are internal calls, never rows of the default trace list.

Every client here is its own process, as a user runs it; each waits for nothing but the
collector's answers (searches polled until the trace is stored)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import requests
from tidemq.common.sampling import QUIET_BY_DEFAULT, is_quiet

from tests.support.cluster import (
    TRACING_ENV,
    create_topic_in_config_center,
    traced_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow  # the topology plus the collector (~10 s)
TOPIC = "ClientTraced"
ENDPOINT_FILE = Path(".data/run/otlp-endpoint")  # `make up` writes it (deploy/local.py)
TIDEMQ = os.path.join(os.path.dirname(sys.executable), "tidemq")
ENDPOINT_VARIABLES = ("TIDEMQ_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with traced_cluster(tmp_path_factory.mktemp("client-traces"),
                        broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        yield cluster


def _env(stack, **extra: str) -> dict[str, str]:
    """A user's shell: the cluster's addresses, no tracing variable unless `extra` sets one."""
    env = {k: v for k, v in os.environ.items() if k not in ENDPOINT_VARIABLES}
    return {**env, **TRACING_ENV, "TIDEMQ_NAMESRV_ADDRS": stack.namesrv_addrs,
            "TIDEMQ_CONFIG_CENTER": stack.config_center.addr, **extra}


def _tidemq(stack, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    completed = subprocess.run([TIDEMQ, "-o", "json", *args], env=_env(stack, **env), cwd=cwd,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return completed


def _api(stack, path: str, **params) -> dict:
    response = requests.get(f"{stack.extra['collector_url']}{path}", params=params, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def _stored_trace(stack, msg_id: str, client_service: str) -> dict:
    """The trace the default list finds by `msg_id`, once the client's and the broker's spans
    are both stored."""
    def found():
        traces = _api(stack, "/api/traces", msg_id=msg_id)["traces"]
        return next((t for t in traces if {client_service, "broker"} <= set(t["services"])),
                    None)

    return wait_until(found, 30, interval=0.2,
                      message=f"the trace of {msg_id} with {client_service} and broker spans")


def _assert_publish_then_store(stack, summary: dict, sent: dict, client_service: str) -> None:
    assert summary["root_service"] == client_service
    assert summary["root_name"] == f"{TOPIC} publish"
    spans = _api(stack, f"/api/traces/{summary['trace_id']}")["spans"]
    [publish] = [s for s in spans if s["name"] == f"{TOPIC} publish"]
    assert publish["attributes"]["messaging.message.id"] == sent["unique_id"]
    stores = [s for s in spans if s["service"] == "broker"
              and s["attributes"].get("messaging.message.id") == sent["msg_id"]]
    assert stores, spans
    by_id = {s["span_id"]: s for s in spans}
    # the broker's span descends from the client's publish span (through its gRPC call span)
    store = stores[0]
    while store.get("parent_span_id") in by_id and store["span_id"] != publish["span_id"]:
        store = by_id[store["parent_span_id"]]
    assert store["span_id"] == publish["span_id"], spans
    # the other id of the message finds the same trace
    assert summary["trace_id"] in {t["trace_id"] for t in
                                   _api(stack, "/api/traces", msg_id=sent["unique_id"])["traces"]}


def test_a_message_sent_with_the_command_is_found_by_its_msg_id(stack, tmp_path):
    completed = _tidemq(stack, "send", TOPIC, "from the command line", "--key",
                        f"cli-{uuid.uuid4().hex[:8]}", cwd=tmp_path,
                        TIDEMQ_OTLP_ENDPOINT=stack.otlp_endpoint)
    [sent] = json.loads(completed.stdout)
    summary = _stored_trace(stack, sent["msg_id"], "tidemq-cli")
    _assert_publish_then_store(stack, summary, sent, "tidemq-cli")


def test_the_command_finds_make_ups_collector_in_the_endpoint_file(stack, tmp_path):
    """No variable set: run inside a checkout whose `make up` wrote .data/run/otlp-endpoint."""
    (tmp_path / ENDPOINT_FILE).parent.mkdir(parents=True)
    (tmp_path / ENDPOINT_FILE).write_text(stack.otlp_endpoint + "\n")
    (tmp_path / "docs").mkdir()
    completed = _tidemq(stack, "send", TOPIC, "from a checkout", cwd=tmp_path / "docs")
    [sent] = json.loads(completed.stdout)
    _stored_trace(stack, sent["msg_id"], "tidemq-cli")


SDK_PRODUCER = textwrap.dedent('''
    import json, sys
    from tidemq.client import Message, Producer
    with Producer(sys.argv[1]) as producer:
        result = producer.send(Message(sys.argv[2], b"from the SDK"))
    print(json.dumps({"msg_id": result.msg_id, "unique_id": result.unique_id}))
''')  # no tracing call: the environment names the collector; spans flush at exit


def test_a_message_sent_with_the_sdk_is_found_by_its_msg_id(stack, tmp_path):
    completed = subprocess.run(
        [sys.executable, "-c", SDK_PRODUCER, stack.namesrv_addrs, TOPIC], cwd=tmp_path,
        env=_env(stack, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{stack.otlp_endpoint}",
                 OTEL_SERVICE_NAME="orders-app"),
        capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    sent = json.loads(completed.stdout.splitlines()[-1])
    summary = _stored_trace(stack, sent["msg_id"], "orders-app")
    _assert_publish_then_store(stack, summary, sent, "orders-app")


def test_offset_polls_are_internal_calls_not_rows_of_the_default_list(stack, tmp_path):
    """`topic describe` and `group describe` read offsets the way the console's pages and a
    consumer's lag figures do (GetQueueOffsets, QueryOffsets). Then a send: once its store
    span is in, every span the broker ended before it has been exported too (one queue)."""
    endpoint = {"TIDEMQ_OTLP_ENDPOINT": stack.otlp_endpoint}
    _tidemq(stack, "topic", "describe", TOPIC, cwd=tmp_path, **endpoint)
    subprocess.run([TIDEMQ, "group", "describe", "offset-poller"], env=_env(stack, **endpoint),
                   cwd=tmp_path, capture_output=True, timeout=60)  # unknown group: exit 1
    [sent] = json.loads(_tidemq(stack, "send", TOPIC, "after the polls", cwd=tmp_path,
                                **endpoint).stdout)
    _stored_trace(stack, sent["msg_id"], "tidemq-cli")

    polls = ("GetQueueOffsets", "QueryOffsets")
    listed = [t["root_name"] or "(root span not received)"
              for t in _api(stack, "/api/traces", limit=200)["traces"]]
    assert not [name for name in listed if is_quiet(name, frozenset(polls))], listed
    assert not [name for name in listed if is_quiet(name, frozenset(QUIET_BY_DEFAULT))], listed
    everything = [t["root_name"] or "" for t in
                  _api(stack, "/api/traces", limit=500, internal="true")["traces"]]
    assert not [name for name in everything if is_quiet(name, frozenset(polls))], everything

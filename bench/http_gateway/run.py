"""The HTTP gateway against its framework's floor: pop 32 + one batch ack through the gateway,
beside a bare Flask app under the same gunicorn set-up answering the same JSON, and the SDK's
`ack_many` on the same broker, all in the same run.

    uv run --frozen python -m bench.http_gateway.run [--quick] [--messages N] [--traced]

Starts etcd, Redis, the config center, two name servers, one broker group, the HTTP gateway
(2 workers, gthread, its default threads) and the bare app (bare_app.py: the gateway's own
GatewayApplication and settings, a Flask app answering the pop and ack routes with the same
JSON shapes, nothing behind them). Sends the messages once; each reader is its own group.

For one client thread and for four (each thread one keep-alive connection, http.client), the
gateway's pop 32 + one batch ack of the 32 handles and the bare app's same two requests,
alternated in rounds so both see the same machine load; then the SDK's SimpleConsumer
receive(32) + ack_many on one thread. Printed: messages/s, requests/s, and the server's CPU per
request (user + system of the gunicorn arbiter and its workers, from /proc, over the timed
phase), with the ratio to the bare app's. Targets (issue #37): gateway CPU per request
<= 1.5x the bare app's at the same concurrency; HTTP pop 32 + batch ack >= 0.4x the SDK's
ack_many. `--traced` adds a trace collector every service exports to (the deployed set-up:
the gateway's Flask instrumentation on). Before the pops, `--http-sends` one-message sends go
through the gateway; the last lines give the gateway's broker calls by method and transport
(its `tidemq_rpc_calls_total`) and their share on the wire protocol (target, issue #37: >= 95 %
with tracing at its default sampling).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

from tidemq.client import Message, Producer, SimpleConsumer  # noqa: E402

from tests.support.cluster import (  # noqa: E402
    running_cluster,
    traced_cluster,
    wait_for_route,
)

TOPIC = "BenchHttp"
QUEUES = 4
BATCH = 32
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def process_tree_cpu_s(root: int) -> float:
    """User + system CPU seconds of `root` and its children (gunicorn's arbiter and workers)."""
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == root:
                pids.append(int(entry))
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (after pid and comm)
    return total / CLOCK_TICK


class Client:
    """One keep-alive HTTP/1.1 connection posting JSON."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, path: str, document: dict, expect: int = 200) -> dict:
        self.connection.request("POST", path, json.dumps(document).encode(),
                                {"Content-Type": "application/json"})
        response = self.connection.getresponse()
        payload = response.read()
        if response.status != expect:
            raise SystemExit(f"POST {path}: {response.status} {payload[:300]!r}")
        return json.loads(payload)

    def close(self) -> None:
        self.connection.close()


def http_pop_ack(port: int, group: str, messages: int, threads: int) -> tuple[float, int]:
    """`threads` clients pop 32 + batch-ack the handles until `messages` are acked (or the
    group runs dry); (seconds, requests)."""
    base = f"/v1/groups/{group}/topics/{TOPIC}"
    lock, done, requests_made = threading.Lock(), [0], [0]
    errors: list[BaseException] = []

    def work() -> None:
        client = Client(port)
        try:
            while True:
                with lock:
                    if done[0] >= messages:
                        return
                popped = client.post(f"{base}/pop", {"max": BATCH})["messages"]
                handles = [message["receipt_handle"] for message in popped]
                made = 1
                if handles:
                    results = client.post(f"{base}/ack", {"receipt_handles": handles})
                    if not all(r["acked"] for r in results["results"]):
                        raise SystemExit(f"batch ack failed: {results}")
                    made += 1
                with lock:
                    done[0] += len(handles)
                    requests_made[0] += made
                if not handles:
                    return  # the group has seen every message
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
        finally:
            client.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed, requests_made[0]


def measured(pid: int, run) -> dict:
    cpu = process_tree_cpu_s(pid)
    seconds, requests_made = run()
    cpu = process_tree_cpu_s(pid) - cpu
    return {"seconds": seconds, "requests": requests_made, "msgs": requests_made / 2 * BATCH,
            "cpu_s": cpu}


def sdk_ack_many(cluster, group: str, messages: int) -> float:
    with SimpleConsumer(cluster.namesrv_addrs, group, TOPIC) as consumer:
        consumer.receive(1, wait_s=1)  # connected and routed before the clock starts
        started, seen = time.perf_counter(), 1
        while seen < messages:
            received = consumer.receive(BATCH, wait_s=1)
            if not received:
                break
            failed = [r for r in consumer.ack_many(received) if not r.ok]
            if failed:
                raise SystemExit(f"batch ack failed: {failed[0].error}")
            seen += len(received)
        return seen / (time.perf_counter() - started)


def http_sends(port: int, count: int) -> None:
    """`count` one-message sends through the gateway (a traced send is what once left the
    wire: issue #37)."""
    client = Client(port)
    try:
        for n in range(count):
            client.post(f"/v1/topics/{TOPIC}/messages",
                        {"messages": [{"body": f"http send {n}", "key": f"k{n}"}]}, expect=201)
    finally:
        client.close()


def calls_by_transport(metrics_port: int) -> dict[str, dict[str, float]]:
    """The gateway's tidemq_rpc_calls_total (its workers summed) as {method: {transport: n}}."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",  # noqa: S310
                                timeout=10) as reply:
        page = reply.read().decode()
    calls: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name == "tidemq_rpc_calls_total":
                calls.setdefault(sample.labels["method"], {})[sample.labels["transport"]] = \
                    sample.value
    return calls


def summed(rounds: list[dict]) -> dict:
    total = {key: sum(r[key] for r in rounds) for key in ("seconds", "requests", "msgs", "cpu_s")}
    total["msgs_per_s"] = total["msgs"] / total["seconds"]
    total["req_per_s"] = total["requests"] / total["seconds"]
    total["cpu_us_per_req"] = total["cpu_s"] / total["requests"] * 1e6
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=24_000,
                        help="messages each gateway reader acks (per concurrency)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternations of gateway and bare app per concurrency")
    parser.add_argument("--quick", action="store_true", help="6000 messages, 2 rounds")
    parser.add_argument("--traced", action="store_true",
                        help="every service exports spans to a trace collector (as deployed)")
    parser.add_argument("--http-sends", type=int, default=200,
                        help="one-message sends through the gateway before the pops")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4],
                        help="client threads (concurrency) to measure")
    parser.add_argument("--gateway-flag", action="append", default=[],
                        help="extra flag for both gunicorn apps (e.g. --gateway-flag=--threads=8)")
    args = parser.parse_args()
    messages, rounds = (6_000, 2) if args.quick else (args.messages, args.rounds)
    per_round = max(BATCH, messages // rounds // BATCH * BATCH)
    cluster_of = traced_cluster if args.traced else running_cluster
    results: dict[int, dict[str, list[dict]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp, \
            cluster_of(Path(tmp), broker_names=("broker-a",)) as cluster:
        from tidemq.configclient.client import ConfigClient
        from tidemq.configclient.topics import TopicDefinitions

        with ConfigClient(cluster.config_center.addr) as config:
            TopicDefinitions(config).create(TOPIC, QUEUES)
        wait_for_route(cluster, TOPIC, 1)
        gateway = cluster.start_gateway(workers=2, extra=args.gateway_flag)
        bare = cluster.start("bench.http_gateway.bare_app", ["--workers", "2",
                                                             *args.gateway_flag])
        # Every gateway group reads its own copy: rounds x concurrencies groups, all messages.
        total = per_round + BATCH * 8
        with Producer(cluster.namesrv_addrs) as producer:
            for start in range(0, total, 256):
                producer.send_many([Message(TOPIC, b"x" * 256)
                                    for _ in range(min(256, total - start))])
        http_sends(gateway.port, args.http_sends)
        warm = Client(gateway.port)
        warm.post(f"/v1/groups/bench-warm/topics/{TOPIC}/pop", {"max": BATCH})
        warm.close()
        for threads in args.threads:
            rows = results.setdefault(threads, {"gateway": [], "bare": []})
            for index in range(rounds):
                group = f"bench-http-{threads}-{index}"
                rows["gateway"].append(measured(gateway.info["pid"], lambda g=group, t=threads:
                                                http_pop_ack(gateway.port, g, per_round, t)))
                rows["bare"].append(measured(bare.info["pid"], lambda g=group, t=threads:
                                             http_pop_ack(bare.port, g, per_round, t)))
        sdk = sdk_ack_many(cluster, "bench-sdk-batch", per_round)
        calls = calls_by_transport(gateway.info["metrics_port"])
    print(f"HTTP pop {BATCH} + one batch ack; {per_round} messages x {rounds} rounds per row, "
          f"alternated; server CPU = gunicorn arbiter + workers (/proc)"
          f"{'; traced' if args.traced else ''}")
    print(f"{'server':<34}{'clients':>8}{'msgs/s':>10}{'req/s':>9}{'CPU us/req':>12}"
          f"{'vs bare':>9}")
    verdicts = []
    for threads, rows in results.items():
        gw, floor = summed(rows["gateway"]), summed(rows["bare"])
        for name, row in (("bare Flask app (floor, same run)", floor), ("gateway", gw)):
            ratio = row["cpu_us_per_req"] / floor["cpu_us_per_req"]
            print(f"{name:<34}{threads:>8}{row['msgs_per_s']:>10.0f}{row['req_per_s']:>9.0f}"
                  f"{row['cpu_us_per_req']:>12.0f}{ratio:>8.2f}x")
        ratio = gw["cpu_us_per_req"] / floor["cpu_us_per_req"]
        verdicts.append(f"gateway CPU/request at {threads} client(s): {ratio:.2f}x the bare "
                        f"app's (target <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})")
    print(f"{'SDK SimpleConsumer receive 32 + ack_many':<42}{sdk:>10.0f}  msgs/s, one thread")
    one = summed(results[min(results)]["gateway"])
    ratio = one["msgs_per_s"] / sdk
    verdicts.append(f"HTTP pop {BATCH} + batch ack at {min(results)} client(s) / SDK ack_many: "
                    f"{ratio:.2f}x (target >= 0.4x: {'met' if ratio >= 0.4 else 'NOT met'})")
    wire = sum(by.get("wire", 0) for by in calls.values())
    total = sum(sum(by.values()) for by in calls.values())
    print("broker calls from the gateway (tidemq_rpc_calls_total, both workers): " + ", ".join(
        f"{method} {by.get('wire', 0):.0f} wire / {by.get('grpc', 0):.0f} gRPC"
        for method, by in sorted(calls.items())))
    share = wire / total if total else 0.0
    verdicts.append(f"share of the gateway's broker calls on the wire: {share:.1%} "
                    f"({'traced, default sampling' if args.traced else 'untraced'}; target >= "
                    f"95 % with tracing at its default sampling: "
                    f"{'met' if share >= 0.95 else 'NOT met'})")
    for verdict in verdicts:
        print(verdict)


if __name__ == "__main__":
    main()

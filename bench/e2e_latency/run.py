"""End-to-end latency and throughput of TideMQ on loopback, next to a same-run Redis Streams
baseline. Starts its own etcd (the config center's store, one member) / redis (the Redis
Streams peer) / config-center / name servers / broker on ephemeral ports in a temp dir. See
README.md.

    uv run --frozen python bench/e2e_latency/run.py [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BODY = b"x" * 1024
PEERS = [  # measured earlier on this machine (msgs/s, 1 KiB)
    ("Redis Streams (earlier)", "~45 000 publish / ~214 000 consume"),
    ("NATS JetStream", "~23 000"),
    ("RabbitMQ", "8 000 - 21 000"),
]
BROKER_ENV = {"TIDEMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
ROUNDS = 3  # consume runs of the same backlog, TideMQ and Redis alike: the median is printed
PULL_MESSAGES = 1024
PULL_BYTES = 384 << 10  # replies above ~512 KiB cost the broker ~1 page fault per KiB (README)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------- (a) latency

def measure_latency(namesrv: str, topic: str, count: int) -> list[float]:
    """One message at a time: perf_counter at send -> perf_counter in the listener (one
    process, one monotonic clock). The consumer long-polls an idle queue between sends."""
    from tidemq.client import Message, Producer
    from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer

    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    arrived = threading.Event()

    def listener(messages):
        now = time.perf_counter()
        for m in messages:
            latencies.append(now - sent_at[m.body.decode()])
        arrived.set()
        return ConsumeStatus.CONSUME_SUCCESS

    with PushConsumer(namesrv, "bench-latency", topic, listener, consume_from=ConsumeFrom.LAST,
                      concurrency=1, long_poll_s=15.0) as consumer, Producer(namesrv) as producer:
        if not consumer.member.wait_stable(30):
            raise RuntimeError("latency consumer never got its queue")
        sent_at["warm-up"] = time.perf_counter()
        producer.send(Message(topic, b"warm-up"))  # routes, channels, first long poll
        if not arrived.wait(10):
            raise RuntimeError("the warm-up message was not delivered within 10 s")
        latencies.clear()
        for i in range(count):
            key = str(i)
            arrived.clear()
            time.sleep(0.002)  # let the consumer park its long poll: measure the idle path
            sent_at[key] = time.perf_counter()
            producer.send(Message(topic, key.encode()))
            if not arrived.wait(10):
                raise RuntimeError(f"message {i} was not delivered within 10 s")
    return latencies


# ---------------------------------------------------------------- (b) throughput roles

def produce(namesrv: str, topic: str, count: int, batch: int, threads: int) -> None:
    from tidemq.client import Message, Producer

    with Producer(namesrv, compress_threshold=1 << 30) as producer:
        queues = producer.routes.get(topic).write_queues()
        per_thread = count // threads

        def work(index: int) -> None:
            mq = queues[index % len(queues)]
            messages = [Message(topic, BODY) for _ in range(batch)]
            for _ in range(per_thread // batch):
                producer.send_batch(messages, queue=mq)

        start, cpu, faults = time.perf_counter(), time.process_time(), minor_faults(os.getpid())
        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    done = (per_thread // batch) * batch * threads
    print(json.dumps({"messages": done, "seconds": elapsed, "cpu": cpu,
                      "faults": minor_faults(os.getpid()) - faults}))


def consume(namesrv: str, topic: str, count: int, batch: int, max_bytes: int) -> None:
    from tidemq.client import PullConsumer, PullStatus
    from tidemq.client.group import DirectClients

    with PullConsumer(namesrv, consumer_group="bench-tput") as consumer:
        consumer.brokers = DirectClients()
        queues = consumer.fetch_queues(topic)
        for mq in {mq.broker_name: mq for mq in queues}.values():
            # connected before the clock starts, as the Redis peer's client is: the first
            # call to a broker also learns its wire port over gRPC and opens the connection
            consumer.pull(mq, 0, 1)
        start, cpu, faults = time.perf_counter(), time.process_time(), minor_faults(os.getpid())

        def work(mq, totals, index):
            offset = 0
            while True:
                result = consumer.pull(mq, offset, batch, max_bytes=max_bytes)
                if result.status is not PullStatus.FOUND:
                    return
                totals[index] += len(result.messages)
                offset = result.next_offset

        totals = [0] * len(queues)
        workers = [threading.Thread(target=work, args=(mq, totals, i))
                   for i, mq in enumerate(queues)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        got = sum(totals)
        by_broker: dict[str, int] = {}
        for mq, total in zip(queues, totals, strict=True):
            by_broker[mq.broker_name] = by_broker.get(mq.broker_name, 0) + total
    print(json.dumps({"messages": got, "seconds": elapsed, "expected": count, "cpu": cpu,
                      "faults": minor_faults(os.getpid()) - faults, "by_broker": by_broker}))


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid: int) -> int:
    """Minor page faults of a process so far (fresh memory touched for the first time)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def run_role(args: list[str], profile_to: Path | None, env: dict[str, str] | None = None) -> dict:
    command = [sys.executable]
    if profile_to is not None:
        command += ["-m", "cProfile", "-o", str(profile_to)]
    command += [str(Path(__file__).resolve()), *args]
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600,
                         env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- Redis Streams baseline

def redis_streams(url: str, count: int, batch: int) -> tuple[float, float]:
    import redis

    client = redis.Redis.from_url(url)
    client.delete("bench")
    start = time.perf_counter()
    for _ in range(count // batch):
        pipe = client.pipeline(transaction=False)
        for _ in range(batch):
            pipe.xadd("bench", {"b": BODY})
        pipe.execute()
    publish = (count // batch) * batch / (time.perf_counter() - start)
    rates = []
    for _ in range(ROUNDS):   # read ROUNDS times from the start, as TideMQ's backlog is
        start, last, got = time.perf_counter(), "0-0", 0
        while got < (count // batch) * batch:
            reply = client.xread({"bench": last}, count=1000)
            if not reply:
                break
            entries = reply[0][1]
            got += len(entries)
            last = entries[-1][0]
        rates.append(got / (time.perf_counter() - start))
    client.delete("bench")
    return publish, sorted(rates)[ROUNDS // 2]


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (~1 min)")
    parser.add_argument("--profile", action="store_true", help="cProfile the two roles")
    parser.add_argument("--pull-bytes", type=int, default=PULL_BYTES,
                        help=f"max_bytes of each throughput pull (default {PULL_BYTES})")
    parser.add_argument("--broker-malloc-keep-mib", type=int, default=None,
                        help="the broker's --malloc-keep-mib (0 = glibc trims its heap after "
                             "every large reply; see README); default: the broker's default")
    parser.add_argument("--role", choices=["produce", "consume"], help=argparse.SUPPRESS)
    parser.add_argument("--namesrv", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--pull-messages", type=int, default=PULL_MESSAGES,
                        help=argparse.SUPPRESS)
    parser.add_argument("--no-replicated-latency", action="store_true",
                        help="skip (d), send->listener latency through a 3-replica "
                             "SYNC_MASTER group")
    parser.add_argument("--no-tracing-cost", action="store_true",
                        help="skip (c), the broker's CPU per consumed message with tracing "
                             "off and on")
    args = parser.parse_args()
    if args.role == "produce":
        return produce(args.namesrv, args.topic, args.count, batch=256, threads=4)
    if args.role == "consume":
        return consume(args.namesrv, args.topic, args.count, args.pull_messages,
                       args.pull_bytes)

    from tests.support.cluster import (
        BROKER_TEST_FLAGS,
        create_topic_in_config_center,
        process_group,
        start_cluster,
        wait_for_route,
    )
    from tests.support.etcd import start_etcd
    from tests.support.processes import start_redis

    load_before = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    replicated_lat: list[float] = []
    latency_n, tput_n = (200, 40_000) if args.quick else (1000, 200_000)
    tmp = Path(tempfile.mkdtemp(prefix="tidemq-bench-e2e-"))
    etcd, redis = start_etcd(tmp), start_redis(tmp)
    try:
        with process_group(tmp) as start:
            def start_with_env(module, a=None, **kw):
                keep = args.broker_malloc_keep_mib
                env = {**BROKER_ENV,
                       **({} if keep is None else {"TIDEMQ_MALLOC_KEEP_MIB": str(keep)})}
                return start(module, a, env=env if module == "tidemq.broker" else BROKER_ENV)

            cluster = start_cluster(start_with_env, etcd, redis, broker_names=("broker-a",))
            for topic, queues in (("BenchLatency", 1), ("BenchThroughput", 4)):
                create_topic_in_config_center(cluster, topic, queues)
                wait_for_route(cluster, topic, 1)
            namesrv = cluster.namesrv_addrs

            lat = measure_latency(namesrv, "BenchLatency", latency_n)
            role = ["--namesrv", namesrv, "--topic", "BenchThroughput", "--count", str(tput_n)]
            prof = (lambda name: tmp / f"{name}.prof") if args.profile else (lambda name: None)
            broker_pid = cluster.brokers["broker-a"].pid
            before, faults = cpu_seconds(broker_pid), minor_faults(broker_pid)
            produced = run_role(["--role", "produce", *role], prof("produce"))
            produced["broker_cpu"] = cpu_seconds(broker_pid) - before
            produced["broker_faults"] = minor_faults(broker_pid) - faults
            role[-1] = str(produced["messages"])
            runs = []   # the same backlog read ROUNDS times from offset 0: the median run
            for _ in range(ROUNDS):
                before, faults = cpu_seconds(broker_pid), minor_faults(broker_pid)
                run = run_role(["--role", "consume", *role, "--pull-bytes", str(args.pull_bytes)],
                               prof("consume"))
                run["broker_cpu"] = cpu_seconds(broker_pid) - before
                run["broker_faults"] = minor_faults(broker_pid) - faults
                runs.append(run)
            consumed = sorted(runs, key=lambda r: r["messages"] / r["seconds"])[ROUNDS // 2]
            redis_pub, redis_con = redis_streams(redis.url, tput_n, 256)
            tracing_lines = [] if args.no_tracing_cost else measure_tracing_cost(
                cluster, start, BROKER_TEST_FLAGS, tput_n // 4)
            if not args.no_replicated_latency:
                from bench.e2e_latency import replicated
                replicated_lat = replicated.measure(start_with_env, tmp, latency_n,
                                                    measure_latency, redis)
    finally:
        redis.kill()
        etcd.kill()
        if not args.profile:   # ~250 MB of broker data per run
            shutil.rmtree(tmp, ignore_errors=True)

    ms = [v * 1000 for v in lat]
    pub = produced["messages"] / produced["seconds"]
    con = consumed["messages"] / consumed["seconds"]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"\nTideMQ end-to-end on loopback, 1 broker, {'quick' if args.quick else 'full'} run; "
          f"{os.cpu_count()} cores, load average before/after {load_before} / {load}")
    print(f"(a) latency send->listener, {len(ms)} msgs, idle long-polled queue:")
    print(f"    median {statistics.median(ms):.2f} ms (target < 2)   "
          f"p99 {percentile(ms, 99):.2f} ms (target < 10)   max {max(ms):.2f} ms")
    if replicated_lat:
        rms = [v * 1000 for v in replicated_lat]
        print(f"(d) the same through a 3-replica SYNC_MASTER group (ack and visibility after "
              f"the in-sync slaves hold it), {len(rms)} msgs: median "
              f"{statistics.median(rms):.2f} ms   p99 {percentile(rms, 99):.2f} ms   "
              f"max {max(rms):.2f} ms  (replication off, (a): median "
              f"{statistics.median(ms):.2f} ms   p99 {percentile(ms, 99):.2f} ms)")
    print(f"(b) throughput, 1 KiB bodies, {produced['messages']} msgs, "
          "1 producer process (4 threads, batches of 256) / 1 consumer process "
          f"(1 thread per queue, pulls of <= {PULL_MESSAGES} msgs / {args.pull_bytes >> 10} KiB)"
          + ("" if args.broker_malloc_keep_mib is None
             else f"; broker --malloc-keep-mib {args.broker_malloc_keep_mib}") + ":")
    print(f"    TideMQ produce {pub:,.0f} msgs/s   consume {con:,.0f} msgs/s (median of {ROUNDS}) "
          f"(target >= 100 000; consumed {consumed['messages']}/{consumed['expected']})")
    for name, run in (("produce", produced), ("consume", consumed)):
        per = 1e6 / run["messages"]
        print(f"    CPU per message ({name}): client process {run['cpu'] * per:.1f} us, "
              f"broker {run['broker_cpu'] * per:.1f} us; wall {run['seconds'] * per:.1f} us; "
              f"page faults per 1000 msgs: client {run['faults'] * 1000 / run['messages']:.0f}, "
              f"broker {run['broker_faults'] * 1000 / run['messages']:.0f}")
    print(f"    Redis Streams same run (redis-py, XADD pipelines of 256 / XREAD COUNT 1000): "
          f"publish {redis_pub:,.0f} msgs/s   consume {redis_con:,.0f} msgs/s (median of {ROUNDS})")
    for name, figure in PEERS:
        print(f"    {name}: {figure} msgs/s")
    for line in tracing_lines:
        print(line)
    if args.profile:
        print(f"    profiles: {tmp}/produce.prof {tmp}/consume.prof")


def measure_tracing_cost(cluster, start, broker_flags: list[str], per_broker: int,
                         ) -> list[str]:
    """(c): three more broker groups (tracing off / on / every pull recorded) serving one
    topic, the same backlog on each, read by one consumer process (tracing_cost.py)."""
    from bench.e2e_latency import tracing_cost
    from tests.support.cluster import create_topic_in_config_center, wait_for_route

    collector = start("tidemq.tracecollector", ["--http-port", "0"])
    pids = tracing_cost.start_brokers(cluster, start, collector.addr, broker_flags, BROKER_ENV)
    create_topic_in_config_center(cluster, tracing_cost.TOPIC, 1)
    wait_for_route(cluster, tracing_cost.TOPIC, 1 + len(pids))
    role = ["--namesrv", cluster.namesrv_addrs, "--topic", tracing_cost.TOPIC]
    produced = run_role(["--role", "produce", *role, "--count",
                         str(per_broker * (1 + len(pids)))], None)
    consume_role = ["--role", "consume", *role, "--count", str(produced["messages"]),
                    "--pull-messages", str(tracing_cost.PULL_MESSAGES)]
    # over gRPC: the wire protocol carries untraced calls only, which no broker span records
    figures = tracing_cost.measure(lambda: run_role(consume_role, None, {"TIDEMQ_WIRE": "0"}),
                                   cpu_seconds, pids, ROUNDS)
    return tracing_cost.report(figures, produced["messages"] // (1 + len(pids)))


if __name__ == "__main__":
    main()

"""The `tidemq` command line against real processes: redis, config-center, two name servers
and two broker groups. Commands run in-process through typer's CliRunner (same code path as
the console script; one smoke test runs the installed script as a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from tidemq.client.admin import Admin
from tidemq.client.cli import app
from typer.testing import CliRunner

TOPIC = "CliTopic"


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The shared two-broker cluster (tests/conftest.py): this module's topics and groups are
    its own."""
    return shared_cluster


@pytest.fixture(scope="module")
def topic(tidemq):
    created = tidemq.json("topic", "create", TOPIC, "--queues", "2")
    assert created["brokers"], created  # create waits until a name server routes it
    return TOPIC


def test_cluster_list_shows_both_masters(tidemq, cluster):
    brokers = tidemq.json("cluster", "list")
    assert {(b["broker_name"], b["role"], b["addr"]) for b in brokers} == {
        (name, "master", process.addr) for name, process in cluster.brokers.items()}
    assert "broker-a" in tidemq("cluster", "list").stdout


def test_topic_create_list_describe_delete(tidemq):
    created = tidemq.json("topic", "create", "CliScratch", "--queues", "3", "--order")
    assert created["order"] is True and created["queues"] == 3
    invalid = tidemq("topic", "create", "bad name!", expect=1)
    assert "INVALID_TOPIC" in invalid.stderr
    too_long = tidemq("topic", "create", "t" * 250, expect=1)   # Kafka's limit, 249
    assert "INVALID_TOPIC" in too_long.stderr and "1..249 characters, got 250" in too_long.stderr
    longest = tidemq.json("topic", "create", "t" * 249, "--queues", "1")
    assert longest["name"] == "t" * 249
    tidemq("topic", "delete", "t" * 249, "--yes")
    again = tidemq("topic", "create", "CliScratch", "--queues", "3", expect=1)
    assert "TOPIC_ALREADY_EXISTS" in again.stderr and "Traceback" not in again.output

    listed = {t["name"]: t for t in tidemq.json("topic", "list")}
    assert listed["CliScratch"]["queues"] == 3 and listed["CliScratch"]["order"] is True

    described = tidemq.json("topic", "describe", "CliScratch")
    assert {(q["broker_name"], q["queue_id"]) for q in described["queues"]} \
        >= {("broker-a", i) for i in range(3)}
    assert all(q["min_offset"] == q["max_offset"] == 0 for q in described["queues"])

    tidemq("topic", "delete", "CliScratch", input="n\n", expect=1)  # declined: nothing happens
    assert "CliScratch" in {t["name"] for t in tidemq.json("topic", "list")}
    tidemq("topic", "delete", "CliScratch", "--yes")
    assert "CliScratch" not in {t["name"] for t in tidemq.json("topic", "list")}
    missing = tidemq("topic", "describe", "CliScratch", expect=1)
    assert "TOPIC_NOT_EXIST" in missing.stderr


def test_send_consume_view_and_query(tidemq, topic):
    sent = tidemq.json("send", topic, "hello-cli", "--tag", "greet", "--key", "order-7",
                       "--property", "origin=cli")
    (result,) = sent
    assert result["status"] == "SEND_OK" and len(result["msg_id"]) == 32

    viewed = tidemq.json("message", "view", result["msg_id"])
    assert viewed["body"] == "hello-cli" and viewed["tag"] == "greet"
    assert viewed["keys"] == ["order-7"] and viewed["properties"] == {"origin": "cli"}
    assert (viewed["broker_name"], viewed["queue_id"], viewed["queue_offset"]) == \
        (result["broker_name"], result["queue_id"], result["queue_offset"])

    found = tidemq.json("message", "query", topic, "order-7")
    assert [m["msg_id"] for m in found] == [result["msg_id"]]
    assert tidemq.json("message", "query", topic, "no-such-key") == []

    consumed = tidemq("-o", "json", "consume", topic, "--broker", result["broker_name"],
                      "--queue", str(result["queue_id"]), "--offset",
                      str(result["queue_offset"]), "--max", "1").stdout
    (line,) = consumed.splitlines()
    assert json.loads(line)["body"] == "hello-cli"

    bad = tidemq("message", "view", "not-hex", expect=1)
    assert "INVALID_MESSAGE_ID" in bad.stderr
    elsewhere = tidemq("message", "view", "0A0000010000270F" + result["msg_id"][16:], expect=1)
    assert "MESSAGE_NOT_FOUND" in elsewhere.stderr and "10.0.0.1:9999" in elsewhere.stderr


def test_send_file_then_consume_everything_from_beginning(tidemq, topic, tmp_path):
    lines = [f"line-{i}" for i in range(40)]
    path = tmp_path / "bodies.txt"
    path.write_text("\n".join(lines) + "\n")
    sent = tidemq.json("send", topic, "--file", str(path), "--key", "batch-1")
    assert len(sent) == 40 and {r["status"] for r in sent} == {"SEND_OK"}
    piped = tidemq.json_input("send", topic, "--file", "-", input="stdin-1\n\nstdin-2\n")
    assert len(piped) == 2  # the empty line is skipped
    consumed = tidemq("-o", "json", "consume", topic, "--from-beginning").stdout.splitlines()
    bodies = [json.loads(line)["body"] for line in consumed]
    assert {*lines, "stdin-1", "stdin-2"} <= set(bodies)
    # Per queue, consume prints in offset order.
    seen: dict[tuple[str, int], int] = {}
    for row in map(json.loads, consumed):
        queue = (row["broker_name"], row["queue_id"])
        assert row["queue_offset"] > seen.get(queue, -1)
        seen[queue] = row["queue_offset"]


def test_consume_with_a_sql_filter_prints_only_the_matches(tidemq, topic):
    for amount in range(8):
        tidemq.json("send", topic, f"amount-{amount}", "--property", f"cli_amount={amount}")
    consumed = tidemq("-o", "json", "consume", topic, "--from-beginning",
                      "--sql", "cli_amount >= 5 AND cli_amount <> 6").stdout.splitlines()
    assert sorted(json.loads(line)["body"] for line in consumed) == ["amount-5", "amount-7"]
    bad = tidemq("consume", topic, "--sql", "cli_amount >", expect=1)
    assert "INVALID_FILTER" in bad.stderr and "position 12" in bad.stderr
    both = tidemq("consume", topic, "--sql", "cli_amount > 1", "--tags", "x", expect=1)
    assert "exclude each other" in both.output


def test_consume_follow_sees_a_message_sent_later(tidemq, topic, cluster):
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    from tidemq.client import Message, Producer

    with ThreadPoolExecutor(1) as pool, Producer(cluster.namesrv_addrs) as producer:
        follower = pool.submit(tidemq, "-o", "json", "consume", topic, "--follow", "--max", "1")
        # The follower starts at the end of each queue, so a message sent before it has read
        # the queue ends would be skipped: keep sending (with a deadline) until it prints one.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            producer.send(Message(topic, b"followed"))
            try:
                result = follower.result(timeout=1.0)
                break
            except FutureTimeout:
                continue
        else:
            pytest.fail("consume --follow printed nothing within 20 s")
    assert json.loads(result.stdout.splitlines()[0])["body"] == "followed"


def test_offset_for_time_and_group_reset(tidemq, topic, cluster):
    (first,) = tidemq.json("send", topic, "before-mark")
    entries = tidemq.json("offset", "for-time", topic, "--time", "0")
    assert {(e["broker_name"], e["queue_id"]) for e in entries} >= {
        (first["broker_name"], first["queue_id"])}
    assert all(e["offset"] == 0 for e in entries)
    future = tidemq.json("offset", "for-time", topic, "--time", str(int(time.time() * 1000)
                                                                       + 3_600_000))
    described = {(q["broker_name"], q["queue_id"]): q["max_offset"]
                 for q in tidemq.json("topic", "describe", topic)["queues"]}
    assert {(e["broker_name"], e["queue_id"]): e["offset"] for e in future} == described

    reset = tidemq.json("group", "reset-offsets", "cli-group", topic, "--to-time", "0")
    assert {(e["broker_name"], e["queue_id"]) for e in reset} == set(described)
    assert all(e["offset"] == 0 for e in reset)
    with Admin(cluster.namesrv_addrs) as admin:
        lags = {(o.broker_name, o.queue_id): o.lag for o in admin.group_offsets("cli-group")}
    assert lags == described  # committed 0 everywhere: the lag is the whole queue


def test_unreachable_name_server_is_one_clear_sentence():
    result = CliRunner().invoke(app, ["--namesrv", "127.0.0.1:1", "--timeout", "1",
                                      "cluster", "list"])
    assert result.exit_code == 1
    assert "127.0.0.1:1" in result.stderr and "Traceback" not in result.output


def test_console_script_runs(cluster):
    env = {**os.environ, "TIDEMQ_NAMESRV_ADDRS": cluster.namesrv_addrs}
    script = os.path.join(os.path.dirname(sys.executable), "tidemq")
    completed = subprocess.run([script, "-o", "json", "cluster", "list"], env=env,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert {b["broker_name"] for b in json.loads(completed.stdout)} == set(cluster.brokers)


def test_group_list_and_describe_show_members_assignment_and_lag(tidemq, topic, cluster):
    """One member joins through the raw coordinator RPCs (no consumer library involved),
    is assigned every queue of broker-a, commits an offset on one of them."""
    from tidemq.client.admin import coordinator_for
    from tidemq.common.rpc import RpcClient
    from tidemq.v1 import broker_pb2, broker_pb2_grpc

    group = "cli-described"
    coordinator = cluster.brokers[coordinator_for(group, cluster.brokers)]
    rpc = RpcClient(coordinator.addr, broker_pb2_grpc.BrokerServiceStub, timeout=20)
    joined = rpc.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id=group, session_timeout_ms=60_000, rebalance_timeout_ms=10_000,
        client_id="cli-test", client_host="127.0.0.1",
        protocols=[broker_pb2.GroupProtocol(name="averagely",
                                            metadata=json.dumps({"topics": [topic]}).encode())]))
    queues = [[topic, "broker-a", i] for i in range(2)]
    rpc.call("SyncGroup", broker_pb2.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        assignments=[broker_pb2.MemberAssignment(
            member_id=joined.member_id, assignment=json.dumps({"queues": queues}).encode())]))
    tidemq("send", topic, "lagging")
    max_offsets = {(q["broker_name"], q["queue_id"]): q["max_offset"]
                   for q in tidemq.json("topic", "describe", topic)["queues"]}
    RpcClient(cluster.brokers["broker-a"].addr, broker_pb2_grpc.BrokerServiceStub).call(
        "CommitOffsets", broker_pb2.CommitOffsetsRequest(
            consumer_group=group, generation_id=-1,
            offsets=[broker_pb2.QueueOffset(topic=topic, queue_id=0, offset=0)]))

    listed = {g["group_id"]: g for g in tidemq.json("group", "list")}
    assert listed[group]["members"] == 1 and listed[group]["state"] == "Stable"

    described = tidemq.json("group", "describe", group)
    assert described["state"] == "Stable" and described["leader"] == joined.member_id
    (member,) = described["members"]
    assert member["member_id"] == joined.member_id and member["client_id"] == "cli-test"
    assert member["topics"] == [topic]
    assert member["queues"] == [f"{topic}@broker-a#{i}" for i in range(2)]
    offsets = {(o["broker_name"], o["queue_id"]): o for o in described["offsets"]}
    assert set(offsets) == {("broker-a", 0), ("broker-a", 1)}
    assert offsets["broker-a", 0]["committed"] == 0
    assert offsets["broker-a", 0]["lag"] == max_offsets["broker-a", 0]
    assert offsets["broker-a", 1]["committed"] is None and offsets["broker-a", 1]["lag"] is None
    assert all(o["member_id"] == joined.member_id for o in offsets.values())
    text = tidemq("group", "describe", group).stdout
    assert "(leader)" in text and "protocol averagely" in text and "Stable" in text
    rpc.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id=group,
                                                        member_id=joined.member_id))


def test_group_describe_follows_a_real_push_consumer_to_zero_lag(tidemq, topic, cluster,
                                                                  tmp_path):
    """The SDK's PushConsumer joins, gets every queue, consumes and commits: describe shows
    the member, its assignment and a lag that drains to zero."""
    from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer

    from tests.support.processes import wait_until

    tidemq("send", topic, "for-the-group")
    group = "cli-push"
    consumer = PushConsumer(cluster.namesrv_addrs, group, topic,
                            lambda messages: ConsumeStatus.CONSUME_SUCCESS,
                            consume_from=ConsumeFrom.FIRST, auto_commit_interval_s=0.2,
                            long_poll_s=1.0, offset_store_dir=tmp_path)
    with consumer, Admin(cluster.namesrv_addrs) as admin:
        def drained():
            d = admin.group_describe(group)
            return d if len(d.members) == 1 and d.offsets and d.total_lag == 0 \
                and all(o.committed is not None for o in d.offsets) else None

        wait_until(drained, timeout=30, interval=0.2, message=f"{group} drained")
        described = tidemq.json("group", "describe", group)
    (member,) = described["members"]
    queues = {(q["broker_name"], q["queue_id"])
              for q in tidemq.json("topic", "describe", topic)["queues"]}
    assert {q.split("@", 1)[1] for q in member["queues"]} == {f"{b}#{i}" for b, i in queues}
    # a CLUSTERING push consumer also subscribes to its group's retry topic (docs/consumption.md)
    assert member["topics"] == [f"%RETRY%{group}", topic] and described["total_lag"] == 0
    assert {o["member_id"] for o in described["offsets"]} == {member["member_id"]}


def _join_one_member(cluster, group: str, topic: str):
    """A live member through the raw coordinator RPCs; returns (rpc, joined)."""
    from tidemq.client.admin import coordinator_for
    from tidemq.common.rpc import RpcClient
    from tidemq.v1 import broker_pb2, broker_pb2_grpc

    coordinator = cluster.brokers[coordinator_for(group, cluster.brokers)]
    rpc = RpcClient(coordinator.addr, broker_pb2_grpc.BrokerServiceStub, timeout=20)
    joined = rpc.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id=group, session_timeout_ms=60_000, rebalance_timeout_ms=10_000,
        client_id="reset-test", client_host="10.1.2.3",
        protocols=[broker_pb2.GroupProtocol(name="averagely",
                                            metadata=json.dumps({"topics": [topic]}).encode())]))
    rpc.call("SyncGroup", broker_pb2.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        assignments=[]))
    return rpc, joined


def test_reset_offsets_of_a_group_with_live_members_is_refused_naming_them(tidemq, topic,
                                                                           cluster):
    """Members keep their own position and commit over a reset: refuse it (NON_EMPTY_GROUP,
    like Kafka) instead of reporting success for nothing."""
    from tidemq.common.errors import PreconditionFailed
    from tidemq.v1 import broker_pb2

    group = "cli-live-reset"
    rpc, joined = _join_one_member(cluster, group, topic)
    try:
        result = tidemq("group", "reset-offsets", group, topic, "--to-time", "0", expect=1)
        assert "NON_EMPTY_GROUP" in result.stderr
        assert joined.member_id in result.stderr and "10.1.2.3" in result.stderr
        with Admin(cluster.namesrv_addrs) as admin:
            with pytest.raises(PreconditionFailed) as refused:
                admin.reset_group_offsets(group, topic, 0)
            assert refused.value.code == "NON_EMPTY_GROUP"
            assert all(o.committed is None for o in admin.group_offsets(group))  # untouched
    finally:
        rpc.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id=group,
                                                            member_id=joined.member_id))
    reset = tidemq.json("group", "reset-offsets", group, topic, "--to-time", "0")
    assert reset and all(e["offset"] == 0 for e in reset)  # once empty, the reset applies


def _commit_everywhere(cluster, topic: str, groups: list[str]) -> None:
    from tidemq.client import PullConsumer

    for group in groups:
        with PullConsumer(cluster.namesrv_addrs, consumer_group=group) as consumer:
            for mq in consumer.fetch_queues(topic):
                consumer.commit(mq, 0)


def test_a_deleted_topics_offsets_are_orphaned_in_describe_and_can_be_dropped(tidemq, cluster):
    """describe of a group that committed to a deleted topic used to fail TOPIC_NOT_EXIST."""
    tidemq("topic", "create", "CliDoomed", "--queues", "2")
    _commit_everywhere(cluster, "CliDoomed", ["doomed-a"])
    kept = tidemq("topic", "delete", "CliDoomed", "--yes", "--keep-offsets")
    assert "dropped" not in kept.stdout

    described = tidemq.json("group", "describe", "doomed-a")
    assert described["offsets"] and all(o["orphaned"] and o["lag"] is None
                                         and o["max_offset"] is None
                                         for o in described["offsets"])
    text = tidemq("group", "describe", "doomed-a").stdout
    assert "orphaned" in text and "tidemq group delete-offsets doomed-a CliDoomed" in text

    dropped = tidemq.json("group", "delete-offsets", "doomed-a", "CliDoomed")
    assert dropped["brokers"]
    with Admin(cluster.namesrv_addrs) as admin:
        assert admin.group_offsets("doomed-a") == []


def test_topic_delete_drops_every_groups_committed_offsets_of_it(tidemq, cluster):
    tidemq("topic", "create", "CliDoomed2", "--queues", "2")
    _commit_everywhere(cluster, "CliDoomed2", ["doomed-b", "doomed-c"])
    deleted = tidemq("topic", "delete", "CliDoomed2", "--yes")
    assert "2 group(s): doomed-b, doomed-c" in deleted.stdout
    with Admin(cluster.namesrv_addrs) as admin:
        assert admin.group_offsets("doomed-b") == admin.group_offsets("doomed-c") == []


def test_consume_follow_says_what_it_waits_for_and_ctrl_c_exits_130(topic, cluster):
    """One line on stderr (so `-o json` stays clean) says what --follow waits for."""
    from tests.support.cli import interrupt_when_waiting

    ended = interrupt_when_waiting(
        ["-o", "json", "consume", topic, "--follow", "--tags", "created"],
        "waiting for new messages", env={"TIDEMQ_NAMESRV_ADDRS": cluster.namesrv_addrs})
    assert ended.returncode == 130, ended.stderr
    assert ended.stdout == ""
    assert f"queue(s) of {topic}: waiting for new messages tagged created" in ended.stderr
    assert "Traceback" not in ended.stderr


def test_describe_of_an_unknown_group_says_so(tidemq, topic, cluster):
    """A typo'd name used to show an empty Dead group and exit 0."""
    from tidemq.common.errors import NotFound

    missing = tidemq("group", "describe", "no-such-grup", expect=1)
    assert "GROUP_ID_NOT_FOUND" in missing.stderr and "'no-such-grup'" in missing.stderr
    with Admin(cluster.namesrv_addrs) as admin, pytest.raises(NotFound) as raised:
        admin.group_describe("no-such-grup")
    assert raised.value.code == "GROUP_ID_NOT_FOUND"
    _commit_everywhere(cluster, topic, ["only-offsets"])  # no coordinator state, but known
    described = tidemq.json("group", "describe", "only-offsets")
    assert described["state"] == "Dead" and described["offsets"]


def _sent_body(tidemq, sent: dict) -> bytes:
    import base64

    row = tidemq.json("message", "view", sent["msg_id"])
    return row["body"].encode() if "body" in row else base64.b64decode(row["body_base64"])


def test_send_takes_any_bytes_and_never_prints_a_traceback(tidemq, topic, tmp_path):
    missing = tidemq("send", topic, "--file", str(tmp_path / "nope.txt"), expect=1)
    assert "cannot read" in missing.output and "No such file" in missing.output
    assert "Traceback" not in missing.output

    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"caf\xe9\n\nna\xefve\n")  # not UTF-8: each line sent as its bytes
    sent = tidemq.json("send", topic, "--file", str(latin))
    assert [_sent_body(tidemq, s) for s in sent] == [b"caf\xe9", b"na\xefve"]

    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\x01\n\xff\x02")
    (whole,) = tidemq.json("send", topic, "--file", str(blob), "--raw")
    assert _sent_body(tidemq, whole) == b"\x00\x01\n\xff\x02"

    (decoded,) = tidemq.json("send", topic, "AAEC/w==", "--base64")
    assert _sent_body(tidemq, decoded) == b"\x00\x01\x02\xff"
    assert "not base64" in tidemq("send", topic, "%%%", "--base64", expect=1).output

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n\n")
    nothing = tidemq("send", topic, "--file", str(empty), expect=1)
    assert "MESSAGE_BODY_EMPTY" in nothing.stderr and "Traceback" not in nothing.output
    invalid = tidemq("send", "bad topic!", "x", expect=1)
    assert "INVALID_TOPIC" in invalid.stderr and "Traceback" not in invalid.output

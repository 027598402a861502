"""The sink's pure parts (no JVM): options, column checks, row unique ids, queue choice."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)
from tidemq.analytics.sink import (
    WriteOptions,
    WriteQueue,
    check_columns,
    choose_queue,
    row_unique_id,
)
from tidemq.common.errors import InvalidArgument

QUEUES = [WriteQueue("broker-a", "h:1", 0), WriteQueue("broker-a", "h:1", 1),
          WriteQueue("broker-b", "h:2", 0)]


def opts(**extra) -> WriteOptions:
    return WriteOptions.parse({"namesrv": "127.0.0.1:9876", "topic": "t", **extra})


def test_options_defaults_and_errors():
    parsed = opts()
    assert (parsed.exactly_once, parsed.batch_size, parsed.batch_bytes) == (False, 256, 1 << 20)
    assert opts(exactlyOnce="TRUE", BATCHSIZE="8").batch_size == 8
    assert opts(exactlyOnce="true").exactly_once
    with pytest.raises(InvalidArgument, match="exactlyOnce must be true or false"):
        opts(exactlyOnce="yes")
    with pytest.raises(InvalidArgument, match="batchSize must be >= 1"):
        opts(batchSize="0")
    with pytest.raises(InvalidArgument, match="namesrv"):
        WriteOptions.parse({"topic": "t"})


def schema(**columns) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


def test_column_checks():
    check_columns(schema(value=BinaryType(), key=StringType(), tag=StringType(),
                         properties=MapType(StringType(), StringType()), queue=IntegerType(),
                         message_group=StringType(), other=LongType()), opts())
    check_columns(schema(value=StringType(), topic=StringType()),
                  WriteOptions.parse({"namesrv": "h:1"}))
    with pytest.raises(InvalidArgument, match="column named value"):
        check_columns(schema(body=BinaryType()), opts())
    with pytest.raises(InvalidArgument, match="option topic or a topic column"):
        check_columns(schema(value=BinaryType()), WriteOptions.parse({"namesrv": "h:1"}))
    with pytest.raises(InvalidArgument, match="column tag must be string, not bigint"):
        check_columns(schema(value=BinaryType(), tag=LongType()), opts())


@given(st.text(max_size=40), st.integers(0, 10**9), st.integers(0, 10**4),
       st.integers(0, 10**9))
def test_unique_ids_are_deterministic_and_shaped_like_uniq_key(write_id, batch, part, pos):
    first = row_unique_id(write_id, batch, part, pos)
    assert first == row_unique_id(write_id, batch, part, pos)
    assert len(first) == 32 and first == first.upper() and int(first, 16) >= 0
    assert first != row_unique_id(write_id, batch, part, pos + 1)
    assert first != row_unique_id(write_id, batch + 1, part, pos)


def test_queue_choice():
    assert choose_queue(QUEUES, "t", 4, None, None) == QUEUES[1]   # the task's own queue
    assert choose_queue(QUEUES, "t", 4, 2, None) == QUEUES[2]      # explicit beats the rest
    by_group = choose_queue(QUEUES, "t", 0, None, "order-17")
    assert all(choose_queue(QUEUES, "t", p, None, "order-17") == by_group for p in range(5))
    with pytest.raises(InvalidArgument, match="queue 3 is out of range"):
        choose_queue(QUEUES, "t", 0, 3, None)


def pending_records(writer):
    from tidemq.common import record

    return {(target[1].broker, target[1].queue_id): [record.decode(raw)
                                                     for raw in pending.records]
            for target, pending in writer._pending.items()}


def test_rows_become_records_without_a_network():
    """Encoding and routing of one task's rows; batches stay pending (batchSize not reached)."""
    from tidemq.analytics.sink import PartitionWriter

    writer = PartitionWriter(opts(exactlyOnce="true", batchSize="100"), "query-1", 7, 4)
    writer._routes["t"] = QUEUES
    writer.write_columns({"value": [b"\x00\xff", "text", None],
                          "key": ["a b", None, b"k"], "tag": ["T", None, None],
                          "properties": [{"p": "1"}, None, {"UNIQ_KEY": "mine"}],
                          "message_group": [None, None, "g"], "queue": [None, 2, None]}, 3)
    where = {bytes(r.body): (queue, r) for queue, rs in pending_records(writer).items()
             for r in rs}
    own, first = where[b"\x00\xff"]
    assert own == ("broker-b", 0)                        # (partition 4 + batch 7) of 3 queues
    assert first.keys == ["a", "b"] and first.tags == "T" and first.properties["p"] == "1"
    assert first.properties["PRODUCER_ID"] == "spark-query-1-4"
    explicit, text = where[b"text"]
    assert explicit == ("broker-b", 0) and text.keys == [] and text.tags == ""
    grouped, last = where[b""]
    group_queue = choose_queue(QUEUES, "t", 11, None, "g")
    assert grouped == (group_queue.broker, group_queue.queue_id)
    assert last.properties["MESSAGE_GROUP"] == "g" and last.keys == ["k"]
    assert [r.unique_id for r in (first, text, last)] == [    # a row's own UNIQ_KEY loses
        row_unique_id("query-1", 7, 4, i) for i in range(3)]
    with pytest.raises(InvalidArgument, match="binary key must be UTF-8"):
        writer.write_columns({"value": [b"v"], "key": [b"\xff"]}, 1)


def test_a_streams_micro_batches_take_turns_over_the_queues():
    from tidemq.analytics.sink import PartitionWriter

    chosen = []
    for batch_id in range(6):
        writer = PartitionWriter(opts(batchSize="100"), "query-1", batch_id, 0)
        writer._routes["t"] = QUEUES
        writer.write_columns({"value": [b"v"]}, 1)
        chosen.append(next(iter(pending_records(writer))))
    assert chosen == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)] * 2
    again = PartitionWriter(opts(batchSize="100"), "query-1", 4, 0)   # a replay of batch 4
    again._routes["t"] = QUEUES
    again.write_columns({"value": [b"v"]}, 1)
    assert next(iter(pending_records(again))) == chosen[4]

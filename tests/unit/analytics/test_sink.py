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

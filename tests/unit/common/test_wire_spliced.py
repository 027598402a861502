"""Spliced requests: the wire protocol's three parts parse as the very message gRPC is given
(`whole()`), for any field values and batch sizes (a length past one varint byte included)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.common.channel.payload import Spliced, whole
from tidemq.v1 import broker_pb2

requests = st.builds(
    broker_pb2.SendRequest, topic=st.text(max_size=30), queue_id=st.integers(0, 2**31 - 1),
    record_count=st.integers(0, 2**31 - 1), transaction_prepared=st.booleans(),
    scheduled=st.booleans())


@given(requests, st.one_of(st.binary(max_size=300), st.integers(0, 70_000).map(bytes)))
def test_the_parts_parse_as_the_whole_message(head, data):
    expected = broker_pb2.SendRequest()
    expected.CopyFrom(head)
    expected.records = data
    spliced = Spliced(head, "records", data)
    assert broker_pb2.SendRequest.FromString(b"".join(spliced.wire_parts())) == expected
    assert whole(spliced) == expected
    assert spliced.wire_parts()[2] is data  # sent as it is, not copied
    assert not head.records  # the head is left as it was
    assert (spliced.records, spliced.queue_id) == (data, head.queue_id)


def test_a_plain_message_is_its_own_whole():
    request = broker_pb2.SendRequest(topic="t")
    assert whole(request) is request


@pytest.mark.parametrize("field", ["topic", "records"])
def test_only_an_unset_bytes_field_is_spliced(field):
    with pytest.raises(ValueError, match="unset bytes field"):
        Spliced(broker_pb2.SendRequest(topic="t", records=b"x"), field, b"data")


class ShortWrites:
    """A socket whose vectored write stops after `first` bytes (as a full send buffer or a
    signal makes it): what `_send` must finish with sendall."""

    def __init__(self, first: int) -> None:
        self.first, self.out = first, bytearray()

    def sendmsg(self, parts):
        self.out += b"".join(bytes(p) for p in parts)[:self.first]
        return min(self.first, sum(len(p) for p in parts))

    def sendall(self, data):
        self.out += bytes(data)


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=4), st.integers(0, 200))
def test_a_short_vectored_write_is_finished_in_order(parts, first):
    from tidemq.common.wire.client import _send

    sock = ShortWrites(first)
    _send(sock, *parts)
    assert bytes(sock.out) == b"".join(parts)

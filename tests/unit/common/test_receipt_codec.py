"""Receipt handles: what the broker encodes decodes to the same handle, one pop's handles
encoded together equal the handles encoded one by one, and any other text is refused with
INVALID_RECEIPT_HANDLE (never another error)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tidemq.common import errors
from tidemq.common.receipt import ReceiptHandle, broker_of, encode_handles

names = st.text(min_size=1, max_size=40)
counts = st.integers(0, 2**63 - 1)


@given(names, counts, names, st.integers(0, 1023), st.lists(counts, min_size=1, max_size=8))
def test_handles_round_trip_and_batch_encoding_matches_single(broker, checkpoint, topic,
                                                              queue_id, offsets):
    together = encode_handles(broker, checkpoint, topic, queue_id, offsets)
    singly = [ReceiptHandle(broker, checkpoint, topic, queue_id, o).encode() for o in offsets]
    assert together == singly
    assert [ReceiptHandle.decode(t) for t in together] == [
        ReceiptHandle(broker, checkpoint, topic, queue_id, o) for o in offsets]


def test_the_wire_form_is_unchanged():
    """Handles in flight across an upgrade still decode: base64url of the compact JSON."""
    text = ReceiptHandle("broker-a", 7, "orders", 2, 41).encode()
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    assert json.loads(raw) == [1, "broker-a", 7, "orders", 2, 41]


def forged(fields) -> str:
    raw = json.dumps(fields).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize("fields", [
    [2, "b", 1, "t", 0, 0], [1, "b", True, "t", 0, 0], [1, "b", 1, "t", 0, -1],
    [1, 5, 1, "t", 0, 0], [1, "b", 1, "t", 0], [1, "b", 1.5, "t", 0, 0]])
def test_forged_fields_are_refused(fields):
    with pytest.raises(errors.InvalidArgument) as refused:
        ReceiptHandle.decode(forged(fields))
    assert refused.value.code == "INVALID_RECEIPT_HANDLE"


@given(st.text(max_size=200))
def test_any_text_decodes_or_is_refused_with_the_handle_code(text):
    try:
        ReceiptHandle.decode(text)
    except errors.InvalidArgument as exc:
        assert exc.code == "INVALID_RECEIPT_HANDLE"


@given(names, counts, names, st.integers(0, 1023), counts)
def test_broker_of_reads_the_broker_decode_reads(broker, checkpoint, topic, queue_id, offset):
    """Any broker name, quotes and backslashes included (those take decode's path)."""
    text = ReceiptHandle(broker, checkpoint, topic, queue_id, offset).encode()
    assert broker_of(text) == broker


@given(st.text(max_size=60))
def test_broker_of_refuses_what_has_no_handle_head(text):
    """Text whose head is not a handle's is refused as decode refuses it; one whose head is
    gets its broker read, and the broker refuses the rest when the ack arrives."""
    try:
        ReceiptHandle.decode(text)
    except errors.InvalidArgument:
        try:
            broker_of(text)
        except errors.InvalidArgument as refused:
            assert refused.code == "INVALID_RECEIPT_HANDLE"


def reference_decode(raw: bytes) -> ReceiptHandle | None:
    """What a handle means, read with json alone (the decoder's fast path must agree)."""
    try:
        fields = json.loads(raw.decode())
    except ValueError:
        return None
    ok = (isinstance(fields, list) and len(fields) == 6 and fields[0] == 1
          and type(fields[1]) is str and type(fields[3]) is str
          and all(type(n) is int and n >= 0 for n in (fields[2], fields[4], fields[5])))
    return ReceiptHandle(*fields[1:]) if ok else None


@given(names, counts, names, st.integers(0, 1023),
       st.one_of(st.text(alphabet="0123456789]-+. e", max_size=8), st.text(max_size=12)))
@example("broker-a", 7, "orders", 2, "07]").via("JSON has no leading zeros")
@example("broker-a", 7, "orders", 2, "0]").via("but zero itself")
@example("broker-a", 7, "orders", 2, "1 ]").via("whitespace takes the slow path")
@example("broker-a", 7, "orders", 2, "-1]").via("negative")
def test_a_known_head_with_any_tail_decodes_as_json_reads_it(broker, checkpoint, topic,
                                                            queue_id, tail):
    """The first handle of a pop is parsed whole and its head remembered; the others are read
    from that head and their offset, which must mean exactly what the JSON means."""
    ReceiptHandle.decode(ReceiptHandle(broker, checkpoint, topic, queue_id, 0).encode())
    head = json.dumps([1, broker, checkpoint, topic, queue_id], separators=(",", ":"))[:-1]
    raw = f"{head},{tail}".encode()
    expected = reference_decode(raw)
    try:
        decoded = ReceiptHandle.decode(forged_raw(raw))
    except errors.InvalidArgument as refused:
        assert refused.code == "INVALID_RECEIPT_HANDLE" and expected is None
    else:
        assert decoded == expected


def forged_raw(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@given(names, counts, names, st.integers(0, 1023),
       st.one_of(st.text(alphabet="0123456789]-+. e", max_size=8), st.text(max_size=12)))
@example("broker-a", 7, "orders", 2, "07]").via("JSON has no leading zeros")
@example("broker-a", 7, "orders", 2, "12]x").via("bytes after the bracket")
def test_broker_of_answers_what_decode_answers(broker, checkpoint, topic, queue_id, tail):
    """broker_of's inlined known-head path names the broker exactly when decode accepts the
    handle, and refuses it as decode does otherwise."""
    ReceiptHandle.decode(ReceiptHandle(broker, checkpoint, topic, queue_id, 0).encode())
    head = json.dumps([1, broker, checkpoint, topic, queue_id], separators=(",", ":"))[:-1]
    text = forged_raw(f"{head},{tail}".encode())
    try:
        expected = ReceiptHandle.decode(text).broker_name
    except errors.InvalidArgument:
        with pytest.raises(errors.InvalidArgument) as refused:
            broker_of(text)
        assert refused.value.code == "INVALID_RECEIPT_HANDLE"
    else:
        assert broker_of(text) == expected

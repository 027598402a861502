"""The pop's JSON written in C from the broker's records (tidemq_speedups.popped_json) is the
JSON the gateway writes in Python (messages.popped_json_py: orjson over `received_json` of each
decoded message): byte for byte, for any body (text, binary, control characters), topic,
properties (system ones, repeated names, items without a value, text that is not UTF-8),
handles and header fields; None exactly where the Python raises, and otherwise only where its
docstring says (a compressed record, more than 64 properties). The pop route answers the same
bytes either way."""

from __future__ import annotations

import struct

import orjson
import pytest
import tidemq_speedups
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client import compression
from tidemq.client.message import decode_records
from tidemq.client.simple_consumer import ReceivedBatch, ReceivedMessage
from tidemq.common import record
from tidemq.gateway import messages
from tidemq.gateway.app import create_app
from tidemq.gateway.messages import _SYSTEM_NAMES, popped_json_py, received_json
from tidemq.gateway.settings import GatewaySettings

from tests.support.damage import damaged
from tests.unit.gateway.test_http_api import MAX_MESSAGE_SIZE, StubBackend

C = tidemq_speedups.popped_json
# text with what JSON escapes, non-ASCII and separators' neighbours; no lone surrogates
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02",
                                           blacklist_categories=("Cs",)), max_size=10)
names = st.one_of(st.sampled_from(sorted(messages.SYSTEM_PROPERTIES) + ["user", "n", ""]),
                  prop_text)
not_utf8 = st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"])


@st.composite
def raw_properties(draw) -> tuple[bytes, int]:
    """Encoded properties as a broker may store them, and how many items they hold."""
    items = []
    for _ in range(draw(st.integers(0, 6))):
        name, value = draw(names).encode(), draw(prop_text).encode()
        items.append(draw(st.sampled_from([name + b"\x01" + value, name, b"",
                                           name + b"\x01" + value + b"\x01x"])))
    if draw(st.integers(0, 9)) == 0:
        items.append(b"k" + draw(not_utf8) + b"\x01v")
    if draw(st.integers(0, 14)) == 0:  # past what the C renders itself
        items.extend(b"p%d\x01v" % i for i in range(draw(st.integers(60, 70))))
    raw = b"\x02".join(items) + draw(st.sampled_from([b"", b"\x02"]))
    return raw, sum(1 for item in items if item)


body = st.one_of(st.binary(max_size=200), text.map(str.encode),
                 st.sampled_from([b"", b'"\\\x00\x1f\x7f', "h\u00e9 \u2028\U0001f600".encode()]))
topic = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1,
                max_size=20).map(str.encode).filter(lambda t: len(t) <= 249)


@st.composite
def stored(draw) -> tuple[bytes, bool, int]:
    """(one record, compressed, its property count)."""
    props, count = draw(raw_properties())
    data, sys_flag, compressed = draw(body), 0, draw(st.integers(0, 7)) == 0
    if compressed:
        data = compression.compress(data or b"x", compression.ZSTD)
        props += b"\x02COMPRESSION\x01zstd"
        sys_flag, count = record.SYS_FLAG_COMPRESSED, count + 1
    name = draw(not_utf8) if draw(st.integers(0, 19)) == 0 else draw(topic)
    total = record.HEADER_SIZE + len(data) + 1 + len(name) + 2 + len(props)
    header = record.HEADER.pack(
        total, record.MESSAGE_MAGIC, 0, draw(st.integers(0, 2**31 - 1)), 0,
        draw(st.integers(-2**63, 2**63 - 1)), draw(st.integers(0, 2**63 - 1)), sys_flag,
        draw(st.integers(-2**63, 2**63 - 1)), draw(st.binary(min_size=8, max_size=8)),
        draw(st.integers(-2**63, 2**63 - 1)), draw(st.binary(min_size=8, max_size=8)),
        draw(st.integers(-2**31, 2**31 - 1)), 0, len(data))
    raw = bytearray(header + data + bytes([len(name)]) + name + struct.pack(">H", len(props))
                    + props)
    struct.pack_into(">I", raw, record.OFF_CRC,
                     record.record_crc32(memoryview(raw)[record.CRC_START:]))
    return bytes(raw), compressed, count


@settings(max_examples=400, deadline=None)
@given(st.lists(stored(), max_size=5), st.data())
def test_the_c_rendering_writes_the_python_renderings_bytes(batch, data):
    raw = damaged(b"".join(r for r, _, _ in batch), data) if batch else b""
    handles = data.draw(st.lists(text, min_size=len(batch), max_size=len(batch)))
    if data.draw(st.integers(0, 9)) == 0:  # not one handle per record
        handles = handles[:-1] if handles and data.draw(st.booleans()) else handles + ["h"]
    broker = data.draw(st.sampled_from(["broker-a", 'b"\\\u00e9']))
    by_c = C(raw, broker, handles, _SYSTEM_NAMES)
    try:
        by_py = popped_json_py(raw, broker, handles)
    except (record.RecordFormatError, ValueError):
        assert by_c is None
        return
    declined = any(compressed or count > 64 for _, compressed, count in batch)
    if declined and raw == b"".join(r for r, _, _ in batch):
        assert by_c is None
    else:
        assert by_c == by_py
        assert orjson.loads(by_c) == orjson.loads(by_py)


def test_what_json_escapes_and_a_binary_body_are_written_as_orjson_writes_them():
    raws = [record.encode("T\"\\\u00e9", b, properties=record.encode_properties(p),
                          reconsume_times=r, queue_offset=-1, born_timestamp=2**63 - 1)
            for b, p, r in [
                (b'{"a": "\\u00e9\x00\n\t\x1f"}', {"TAGS": "t\n", "KEYS": "a  b", "x": "\""}, 0),
                (b"\xff\xfe\x00", {"UNIQ_KEY": "U", "RETRY_TOPIC": "Orders", "MESSAGE_GROUP": "g"},
                 2**31 - 1),
                (bytes(range(256)), {"RETRY_TOPIC": "", "\u2603": "\U0001f600"}, -5)]]
    raw = b"".join(raws)
    handles = ["h1", "h\"2", "h\u00e9"]
    written = C(raw, "broker-a", handles, _SYSTEM_NAMES)
    assert written == popped_json_py(raw, "broker-a", handles)
    shown = orjson.loads(written)
    assert shown[0]["keys"] == ["a", "", "b"] and shown[0]["properties"] == {"x": "\""}
    assert shown[1]["encoding"] == "base64" and shown[1]["topic"] == "Orders"
    assert shown[1]["delivery_count"] == 2**31
    assert shown[2]["topic"] == "T\"\\\u00e9" and shown[2]["reconsume_times"] == -5


def test_bad_arguments_are_a_type_error():
    with pytest.raises(TypeError):
        C("records", "b", [], _SYSTEM_NAMES)
    with pytest.raises(TypeError):
        C(b"", "b", (), _SYSTEM_NAMES)
    with pytest.raises(TypeError):
        C(b"", "b", [], ("TAGS",))
    with pytest.raises(TypeError):
        C(b"", "b", [])
    assert C(b"", "b", [], _SYSTEM_NAMES) == b"[]"
    assert C(b"", "\ud800", [], _SYSTEM_NAMES) is None   # orjson refuses it too
    raw = record.encode("t", b"x")
    assert C(raw, "b", [5], _SYSTEM_NAMES) is None and C(raw, "b", ["\udc00"], _SYSTEM_NAMES) \
        is None


SENT = [record.encode("Orders", b"text %d" % i, properties=record.encode_properties(
    {"TAGS": "red", "UNIQ_KEY": f"U{i}", "region": "eu"}), queue_offset=i) for i in range(3)]


def batch_of(raws: list[bytes]) -> ReceivedBatch:
    raw = b"".join(raws)
    handles = [f"handle-{i}" for i in range(len(raws))]
    return ReceivedBatch([ReceivedMessage(m, h) for m, h in zip(
        decode_records(raw, "broker-a"), handles, strict=True)], "broker-a", raw, handles)


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("raws", [SENT, [record.encode(
    "Orders", compression.compress(b"z" * 50, compression.ZSTD), sys_flag=1,
    properties=record.encode_properties({"COMPRESSION": "zstd"}))], []])
def test_the_pop_route_answers_what_jsonify_would(raws, debug):
    """From the records in C, or (a compressed record, debug's indented JSON, a stub's plain
    list) as the view always did."""
    backend = StubBackend()
    app = create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE))
    app.debug = debug
    client = app.test_client()
    backend.pop = lambda *args: batch_of(raws)
    answered = client.post("/v1/groups/g/topics/Orders/pop", json={})
    backend.pop = lambda *args: list(batch_of(raws))  # a plain list: rendered in Python
    rendered = client.post("/v1/groups/g/topics/Orders/pop", json={})
    assert answered.status_code == rendered.status_code == 200
    assert answered.data == rendered.data and answered.mimetype == rendered.mimetype
    with app.app_context():
        expected = app.json.response(
            {"messages": [received_json(r.message, r.receipt_handle) for r in batch_of(raws)]})
    assert answered.data == expected.data
    assert len(answered.get_json()["messages"]) == len(raws)


def test_the_extension_renders_the_pop():
    assert messages._popped_json_c is tidemq_speedups.popped_json, (
        "tidemq_speedups did not import: run `make sync` (needs gcc)")
    batch = batch_of(SENT)
    assert messages.popped_json(batch) == popped_json_py(batch.records, "broker-a",
                                                         batch.receipt_handles)
    assert messages.popped_json(list(batch)) is None

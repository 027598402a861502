"""The gateway's orjson JSON (tidemq.gateway.jsonio) answers what Flask's provider and the
standard library answered: same values, the standard library's verdict on what orjson refuses."""

from __future__ import annotations

import datetime
import json
import re
import uuid
from dataclasses import dataclass

import pytest
from flask import Flask, jsonify
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.common.errors import InvalidArgument
from tidemq.gateway import jsonio
from tidemq.gateway.schema import parse_json


@pytest.fixture
def app() -> Flask:
    app = Flask("jsonio-test")
    app.json = jsonio.OrjsonProvider(app)
    return app


@dataclass
class Point:
    x: int
    y: str


@pytest.mark.parametrize("value", [
    {"messages": [{"body": "x" * 256, "queue_offset": 2**63 - 1, "keys": ["a", "b"]}]},
    {"text": "héllo ☃ \u2028", "nested": {"n": None, "t": True, "f": 1.5}},
    {"huge": 2**70},                       # past orjson's 64 bits: Flask's provider writes it
    {"when": datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC)},  # HTTP date
    {"point": Point(1, "y"), "id": uuid.UUID(int=7)},
    {1: "int key"},
    [1, 2, 3],
])
def test_a_response_holds_the_value_flask_would_write(app: Flask, value) -> None:
    with app.app_context():
        fast = jsonify(value)
        expected = json.loads(Flask("stdlib").json.dumps(value))
    assert fast.mimetype == "application/json"
    assert fast.get_data().endswith(b"\n")
    assert json.loads(fast.get_data()) == expected


def test_an_unknown_type_still_fails_as_flask_fails(app: Flask) -> None:
    with app.app_context(), pytest.raises(TypeError):
        jsonify({"x": object()})


@pytest.mark.parametrize("raw", [
    b'{"max": 32}', b'{"n": 123456789012345678901234567890}', b'{"n": -9223372036854775809}',
    b'{"n": 18446744073709551616}', b'{"f": NaN}',
    '{"t": "\u00e9"}'.encode("utf-16"), b'{"a": 1, "a": 2}', b'[1e400]',
])
def test_a_body_parses_to_what_the_standard_library_reads(raw: bytes) -> None:
    assert repr(parse_json(raw)) == repr(json.loads(raw))


@pytest.mark.parametrize("raw", [b'{"max": 32', b"{'max': 32}", b"\xff\xfe{", b"[1,]"])
def test_a_malformed_body_is_refused_with_the_standard_librarys_sentence(raw: bytes) -> None:
    try:
        json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        expected = f"the request body is not valid JSON: {exc}"
    with pytest.raises(InvalidArgument) as refused:
        parse_json(raw)
    assert refused.value.code == "MALFORMED_JSON"
    assert refused.value.message == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=8), st.text("0123456789", min_size=15, max_size=22)
                          .map(str.encode)), max_size=6).map(b"".join))
def test_long_digits_are_found_where_the_regex_finds_them(raw: bytes) -> None:
    """A body that may hold an integer past 64 bits (19 digits in a row) goes to the standard
    library: the translate-and-find test says what `[0-9]{19}` says."""
    assert jsonio.has_long_digits(raw) == (re.search(rb"[0-9]{19}", raw) is not None)


def test_orjson_does_the_writing_and_the_reading(app: Flask, monkeypatch) -> None:
    """The fast path is taken, not just equivalent: orjson writes non-ASCII as UTF-8 where the
    standard library escapes it, and a plain body is read without the standard library."""
    with app.app_context():
        assert "é".encode() in jsonify({"t": "é"}).get_data()
    assert b"\\u00e9" in Flask("stdlib").json.dumps({"t": "é"}).encode()

    def refused(*args, **kwargs):
        raise AssertionError("the standard library parsed a body orjson reads")

    monkeypatch.setattr(jsonio.json, "loads", refused)
    assert parse_json(b'{"max": 32, "t": "\\u00e9"}') == {"max": 32, "t": "é"}

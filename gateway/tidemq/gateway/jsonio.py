"""JSON in and out of the gateway through orjson, answering what the standard library would.

Why: a pop of 32 answers about 13 KB of JSON; Flask's provider (the standard library's
encoder) spent about 70 µs per pop writing it, orjson 11 (in process, a pop's view over a stub
backend: 280 -> 240 µs, an ack's 114 -> 98; docs/http-api.md, "What a request costs"). The
pop's messages are now written in C before they get here (`written`, messages.popped_json).

What does not change: a document orjson cannot write (an integer past 64 bits, a type only
Flask's `default` knows) is written by Flask's own provider instead, and a request body
orjson refuses is parsed again by the standard library, so every accepted body decodes to the
same value and every refused one gets the same 400 sentence as before (NaN, an integer past
64 bits or a UTF-16 body are the standard library's to judge). The one visible difference:
non-ASCII text leaves as UTF-8 instead of `\\uXXXX` escapes (the same JSON value).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
from flask.json.provider import DefaultJSONProvider

# Dates, dataclasses and str/int subclasses go to Flask's `default`, as before (orjson would
# write a datetime as RFC 3339, Flask as an HTTP date).
_DUMP_OPTIONS = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
                 | orjson.OPT_NON_STR_KEYS)
# orjson reads an integer past 64 bits as a float (the standard library: an int, which the
# schema then refuses as out of range): a body with 19 digits in a row is read by the
# standard library (at worst a string holding digits takes the slower path). Found by mapping
# every digit to "0" and everything else to "." and looking for nineteen "0"s: what the regex
# `[0-9]{19}` finds, in 1.4 µs instead of 15 for a batch ack's 2.3 KB of handles.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x2E for i in range(256))
_NINETEEN_DIGITS = b"0" * 19


def has_long_digits(raw: bytes) -> bool:
    """Whether `raw` holds 19 ASCII digits in a row."""
    return _NINETEEN_DIGITS in raw.translate(_DIGITS_AS_ZERO)


def loads(raw: bytes | str) -> Any:
    """A request body's JSON value; a body orjson refuses is the standard library's to parse
    (or refuse, with its own sentence), and so is one that may hold an integer past 64 bits."""
    if isinstance(raw, bytes) and not has_long_digits(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


class OrjsonProvider(DefaultJSONProvider):
    """Flask's JSON provider (jsonify, Response.get_json) over orjson; `sort_keys` must stay
    False (orjson keeps insertion order) and `compact` None or True."""

    sort_keys = False

    def _fast(self, obj: Any, newline: bool = False) -> bytes | None:
        try:
            return orjson.dumps(obj, default=self.default, option=_DUMP_OPTIONS | (
                orjson.OPT_APPEND_NEWLINE if newline else 0))
        except TypeError:  # an integer orjson cannot hold, or a type `default` refuses
            return None

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if not kwargs and not self.sort_keys:
            fast = self._fast(obj)
            if fast is not None:
                return fast.decode()
        return super().dumps(obj, **kwargs)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return super().loads(s, **kwargs) if kwargs else loads(s)

    def response(self, *args: Any, **kwargs: Any):
        obj = self._prepare_response_obj(args, kwargs)
        if not self.sort_keys and self.compact is not False and not self._app.debug:
            fast = self._fast(obj, newline=True)
            if fast is not None:
                return self._app.response_class(fast, mimetype=self.mimetype)
        return super().response(obj)

    def written(self, document: bytes | None, value: Callable[[], Any]):
        """The response `response(value())` gives, from `document`: that value already written
        as orjson writes it (the pop's messages, written from the broker's records in C).
        Without it, or when this provider would not write compact JSON (debug, sort_keys),
        `value()` is written here as usual."""
        if (document is not None and not self.sort_keys and self.compact is not False
                and not self._app.debug):
            return self._app.response_class(document + b"\n", mimetype=self.mimetype)
        return self.response(value())

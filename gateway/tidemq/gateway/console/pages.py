"""Small pure helpers of the console's pages: times typed into forms, trace links, sums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode, urlsplit

from tidemq.common.errors import InvalidArgument

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLISECOND = timedelta(milliseconds=1)   # integer arithmetic: a float timestamp loses a ms


def parse_form_time(text: str | None, field: str) -> int:
    """Unix ms from a form field: '' → 0, digits → ms, else ISO-8601 (a time without a zone,
    what `<input type=datetime-local>` sends, is UTC: the console shows every time in UTC)."""
    text = (text or "").strip()
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{field}: {text!r} is neither Unix milliseconds nor an ISO-8601 "
                              "time such as 2026-11-24T09:30") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max((moment - EPOCH) // MILLISECOND, 0)


def utc(ms: int | None) -> str:
    """A Unix-ms time as the console shows it."""
    if not ms:
        return "-"
    return (EPOCH + ms * MILLISECOND).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def trace_ui_base(url: str) -> str:
    """The tracing dashboard's base URL, or '' when unset or not http(s) (a link is only ever
    built from an http(s) URL, so a setting can never turn into a `javascript:` link)."""
    url = url.strip().rstrip("/")
    return url if urlsplit(url).scheme in ("http", "https") else ""


def message_trace_links(base: str, message: dict) -> dict[str, str]:
    """Where the tracing dashboard shows this message: its journey by msg id, and the
    producer's trace when the message carries its trace context."""
    if not base:
        return {}
    links = {}
    if message.get("msg_id"):
        links["message"] = f"{base}/messages?{urlencode({'msg_id': message['msg_id']})}"
    if message.get("trace_id"):
        links["trace"] = f"{base}/traces/{message['trace_id']}"
    return links


def queue_totals(queues: list[dict]) -> dict[str, int]:
    return {"queues": len(queues),
            "stored": sum(q["max_offset"] - q["min_offset"] for q in queues),
            "written": sum(q["max_offset"] for q in queues),
            "recent": sum(q.get("recent", 0) for q in queues)}


def with_recent_counts(queues: list[dict], offsets_then: list[dict]) -> list[dict]:
    """Each queue with `recent`: messages written since the time of `offsets_then` (its max
    offset minus the offset stored at that time; 0 when the two reads crossed)."""
    then = {(o["broker_name"], o["queue_id"]): o["offset"] for o in offsets_then}
    return [{**q, "recent": max(q["max_offset"] - then.get((q["broker_name"], q["queue_id"]),
                                                           q["max_offset"]), 0)}
            for q in queues]


def parse_flag(text: str | None, field: str) -> bool:
    """A yes/no query parameter: '' → no; anything but 1/0, true/false, yes/no is refused."""
    value = (text or "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise InvalidArgument(f"{field} must be yes or no (1/0, true/false), got {value[:16]!r}")

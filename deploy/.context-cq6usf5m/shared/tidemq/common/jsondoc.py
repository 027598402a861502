"""JSON documents that must be objects: one parse-and-check for every definition and payload
(topic and group definitions, group-protocol metadata), each raising its own error type."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def load_object(raw: bytes, what: str, error: Callable[[str], Exception]) -> dict[str, Any]:
    """`raw` as a JSON object; else `error("<what> is not JSON (…)" / "… must be a JSON object")`."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{what} is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise error(f"{what} must be a JSON object")
    return document

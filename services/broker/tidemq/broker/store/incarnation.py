"""A store's incarnation: which copy of the data (the store id) and which start of it.

"In sync" is a property of a copy of the data, not of a replica id (Kafka KIP-903): a replica
whose disk was wiped or replaced comes back under the same id with none of what it
acknowledged. The store id is made with the store (a wiped directory gets a new one) and the
start counter moves at every start, so the controller and the master can tell a replica that
came back — and how — from one that never left. Both files are replaced atomically.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from .metadata import MetadataFile

STORE_ID_FILE = "store_id"
STARTS_FILE = "starts"


def next_incarnation(data_dir: Path) -> str:
    """Count this start and return "<store id>:<start>" (creating the store id the first
    time). Unreadable files count as absent: a new store id is the conservative answer (the
    replica must catch up before it is in sync again)."""
    ids, starts = MetadataFile(data_dir / STORE_ID_FILE), MetadataFile(data_dir / STARTS_FILE)
    store_id = _text(ids.read())
    if not store_id or ":" in store_id:
        store_id = uuid.uuid4().hex
        ids.write(store_id.encode())
    try:
        start = int(_text(starts.read()) or 0) + 1
    except ValueError:
        start = 1
    starts.write(str(start).encode())
    return f"{store_id}:{start}"


def _text(raw: bytes | None) -> str:
    try:
        return raw.decode().strip() if raw else ""
    except UnicodeDecodeError:
        return ""

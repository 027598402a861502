"""`tidemq config export` / `import`: every definition and setting of a cluster as one JSON
document, to move it to another cluster or keep it beside the etcd snapshots.

    tidemq config export > cluster.json                 # /tidemq/ by default
    tidemq config import cluster.json                   # keys that exist are left alone
    tidemq config import cluster.json --overwrite       # ... or replaced

The document is `{"format": "tidemq-config-export/1", "revision": R, "keys": [{"key": K,
"value_b64": V}, ...]}`: values travel as base64, so any bytes survive. Keys under a lease
(broker liveness, the controller's claim) belong to the processes that hold them and are
left out: a restored cluster's processes write them again. Import creates each key with a
compare-and-set (absent) unless --overwrite, so it never replaces what the target holds
without being asked, and it prints its progress on stderr.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from tidemq.client.cli_common import err
from tidemq.client.cli_config import DEFAULT_ADDR, Addr, _run

if TYPE_CHECKING:
    from tidemq.configclient.client import ConfigClient

FORMAT = "tidemq-config-export/1"
PROGRESS_EVERY = 500  # keys between two progress lines on stderr


def export_document(client: ConfigClient, prefix: str) -> dict[str, Any]:
    """Every lease-free key under `prefix`, read in one snapshot."""
    result = client.range(prefix)
    keys = [{"key": kv.key, "value_b64": base64.b64encode(kv.value).decode()}
            for kv in result.kvs if not kv.lease]
    return {"format": FORMAT, "prefix": prefix, "revision": result.revision, "keys": keys}


def import_document(client: ConfigClient, document: Any, *, overwrite: bool,
                    progress=lambda done, total: None) -> tuple[int, int]:
    """Write the document's keys: (written, skipped because they exist)."""
    entries = _entries(document)
    written = skipped = 0
    for index, (key, value) in enumerate(entries, 1):
        result = client.put(key, value, expected_revision=None if overwrite else 0)
        if result.succeeded:
            written += 1
        else:
            skipped += 1
        if index % PROGRESS_EVERY == 0 or index == len(entries):
            progress(index, len(entries))
    return written, skipped


def _entries(document: Any) -> list[tuple[str, bytes]]:
    """The document's keys, checked whole before anything is written."""
    from tidemq.common.errors import InvalidArgument

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise InvalidArgument(f"not a TideMQ config export: expected \"format\": \"{FORMAT}\"")
    raw = document.get("keys")
    if not isinstance(raw, list):
        raise InvalidArgument("the export has no \"keys\" list")
    entries: list[tuple[str, bytes]] = []
    for position, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) \
                or not entry["key"].startswith("/") or not isinstance(entry.get("value_b64"), str):
            raise InvalidArgument(f"entry {position} of the export is not "
                                  "{\"key\": \"/...\", \"value_b64\": \"...\"}")
        try:
            value = base64.b64decode(entry["value_b64"], validate=True)
        except ValueError:
            raise InvalidArgument(f"entry {position} ({entry['key']}): value_b64 is not "
                                  "base64") from None
        entries.append((entry["key"], value))
    return entries


def export(prefix: Annotated[str, typer.Option(help="keys under this prefix")] = "/tidemq/",
           out: Annotated[Path | None, typer.Option(
               "--out", help="write to this file (default: standard output)")] = None,
           config_center: Addr = DEFAULT_ADDR) -> None:
    """Every definition and setting under PREFIX as one JSON document (leased keys left out)."""
    def action(client: ConfigClient) -> None:
        document = export_document(client, prefix)
        text = json.dumps(document, indent=1)
        if out is None:
            print(text)
        else:
            out.write_text(text + "\n")
        err.print(f"exported {len(document['keys'])} keys under {prefix} at revision "
                  f"{document['revision']}")

    _run(config_center, action)


def import_(file: Annotated[str, typer.Argument(help="an export's file; '-' = standard input")],
            overwrite: Annotated[bool, typer.Option(
                help="replace keys that exist (default: leave them and count them skipped)")]
            = False,
            config_center: Addr = DEFAULT_ADDR) -> None:
    """Write an export's keys into this cluster (each created only if absent, unless
    --overwrite)."""
    def action(client: ConfigClient) -> None:
        from tidemq.common.errors import InvalidArgument

        text = sys.stdin.read() if file == "-" else _read(file)
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"{file} is not JSON: {exc}") from None
        written, skipped = import_document(
            client, document, overwrite=overwrite,
            progress=lambda done, total: err.print(f"imported {done}/{total} keys"))
        err.print(f"{written} keys written, {skipped} left as they were (they exist; "
                  "--overwrite replaces them)" if skipped else f"{written} keys written")

    _run(config_center, action)


def _read(file: str) -> str:
    from tidemq.common.errors import InvalidArgument

    try:
        return Path(file).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {file}: {exc.strerror}") from None

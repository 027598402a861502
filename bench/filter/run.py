"""Filter benchmark: the broker's cost per evaluated message of a SQL92 property filter, beside
the same run's tag-hash match and unfiltered pull.

    uv run --frozen python bench/filter/run.py [--quick] [--messages 200000]

One MessageStore in a temporary directory (no network: what is measured is the broker's own
work), one queue of messages of 256 B bodies with a tag of four and properties `amount`
(0..99) and `region` (eu, us, apac or none), as producers encode them. The whole queue is then
read from offset 0 as a consumer pages through it (32 messages a pull) four ways:

* unfiltered: the baseline (one slice per run of records, C helpers);
* tag hash: `A` (25 % match), the ConsumeQueue hash compared per unit in Python;
* SQL92 simple: `region = 'eu'` (25 %), and SQL92 compound:
  `amount BETWEEN 20 AND 70 AND region IN ('eu', 'apac')` (≈ 25 %) — each candidate's
  properties read from the CommitLog (not its body) and evaluated by the compiled closures.

Figures are CPU time per scanned message, the least of three rounds (process time, so a busy
machine inflates them less than wall time) and the evaluation alone (`matches_encoded` over properties already in memory).
Printed, not asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tidemq` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidemq.broker.store import MessageStore, StoreConfig
from tidemq.broker.store.loops import ACCELERATED
from tidemq.common import record
from tidemq.common.sqlfilter import compile_sql92

TOPIC = "BenchFilter"
HOST = record.pack_host("127.0.0.1", 10911)
TAGS = ["A", "B", "C", "D"]
REGIONS = ["eu", "us", "apac", None]
SIMPLE = "region = 'eu'"
COMPOUND = "amount BETWEEN 20 AND 70 AND region IN ('eu', 'apac')"
PAGE = 32


def properties(i: int) -> dict[str, str]:
    props = {"amount": str((i * 37) % 100)}
    region = REGIONS[(i // 4) % 4]
    if region is not None:
        props["region"] = region
    return props


def fill(store: MessageStore, count: int) -> list[bytes]:
    """Append `count` messages in producer-sized batches; the encoded properties of each."""
    encoded, body = [], b"x" * 256
    for start in range(0, count, 64):
        raws = []
        for i in range(start, min(start + 64, count)):
            message = record.OutgoingMessage(TOPIC, body, tags=TAGS[i % 4],
                                             properties=properties(i))
            raw = record.encode_message(message)[0]
            raws.append(raw)
            encoded.append(record.encode_properties(message.system_properties()))
        store.append_batch(TOPIC, 0, b"".join(raws), len(raws))
    assert store.wait_dispatched(120)
    return encoded


def read_queue(store: MessageStore, tag_hashes=None, property_filter=None,
               rounds: int = 3) -> tuple[float, int]:
    """Page through the whole queue `rounds` times; (least CPU seconds of a round, messages
    returned). The least is the figure least disturbed by other work on the machine."""
    best, found = float("inf"), 0
    for _ in range(rounds):
        offset, found, end = 0, 0, store.max_offset(TOPIC, 0)
        started = time.process_time()
        while offset < end:
            got = store.get_messages(TOPIC, 0, offset, PAGE, 4 << 20, tag_hashes,
                                     property_filter)
            found += got.record_count
            offset = got.next_begin_offset
        best = min(best, time.process_time() - started)
    return best, found


def evaluation_only(selector, encoded: list[bytes], rounds: int = 3) -> float:
    """Least CPU seconds of `matches_encoded` over every message's properties, in memory."""
    matches, best = selector.matches_encoded, float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for raw in encoded:
            matches(raw)
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="20 000 messages (a few seconds)")
    args = parser.parse_args()
    count = 20_000 if args.quick else args.messages
    with tempfile.TemporaryDirectory(prefix="bench-filter-") as tmp:
        store = MessageStore(StoreConfig(data_dir=Path(tmp), segment_size=256 << 20,
                                         index_slots=100_000, index_entries=4 * count), HOST)
        store.start()
        try:
            encoded = fill(store, count)
            simple, compound = compile_sql92(SIMPLE), compile_sql92(COMPOUND)
            read_queue(store)  # warm the page cache and the mappings
            rows = [
                ("unfiltered pull (baseline)", *read_queue(store)),
                ("tag hash 'A'", *read_queue(store, frozenset({record.tag_hash("A")}))),
                (f"SQL92 {SIMPLE}", *read_queue(store, None, simple.matches_encoded)),
                (f"SQL92 {COMPOUND}", *read_queue(store, None, compound.matches_encoded)),
            ]
            eval_simple = evaluation_only(simple, encoded)
            eval_compound = evaluation_only(compound, encoded)
        finally:
            store.shutdown()
    print(f"filter benchmark: {count} messages of 256 B in one queue, pulls of {PAGE}, "
          f"C store loops: {ACCELERATED}")
    print(f"{'read of the whole queue (least CPU time of 3 rounds)':<70} {'matched':>8} "
          f"{'µs/msg scanned':>15}")
    for name, seconds, found in rows:
        print(f"{name:<70} {found:>8} {seconds / count * 1e6:>15.2f}")
    base = rows[0][1] / count
    print(f"SQL92 compound costs {rows[3][1] / count / base:.1f}x the unfiltered pull and "
          f"{rows[3][1] / max(rows[1][1], 1e-9):.1f}x the tag-hash match, same run")
    print(f"evaluation alone (properties in memory): simple {eval_simple / count * 1e9:.0f} "
          f"ns/msg, compound {eval_compound / count * 1e9:.0f} ns/msg")


if __name__ == "__main__":
    main()

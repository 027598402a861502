"""Property: whatever the properties' layout (producer order, other orders, look-alike names,
duplicates, empty values, no trailing separator), the dispatcher's CQ tag hash and index
entries are those of the first property named exactly TAGS / UNIQ_KEY / KEYS. Producer
layouts take the dispatcher's one-regex fast path, the others its general search."""

from __future__ import annotations

import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store.index import key_hash
from tidemq.common import record

from .helpers import open_store, property_lists, small_config


def first(props: list[tuple[str, str]], name: str) -> str | None:
    return next((value for n, value in props if n == name), None)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(property_lists, st.booleans()), min_size=1, max_size=12))
def test_tag_hash_and_index_entries_follow_the_first_exact_property(tmp_path_factory, records):
    store = open_store(small_config(tmp_path_factory.mktemp("store"), index_slots=16_384,
                                    index_entries=4_000))
    raws = []
    for props, trailing in records:
        raw_props = b"".join(f"{n}\x01{v}\x02".encode() for n, v in props)
        if raw_props and not trailing:
            raw_props = raw_props[:-1]   # the last value then runs to the record end
        raws.append(record.encode("t", b"body", properties=raw_props))
    result = store.append_batch("t", 0, b"".join(raws), len(raws))
    assert store.wait_dispatched(5)
    units = store.queues.get("t", 0).read_units(0, len(raws))
    for (props, _), physical, unit in zip(records, result.physical_offsets, units, strict=True):
        tags = first(props, "TAGS")
        assert unit[2] == (zlib.crc32(tags.encode()) if tags else 0)
        expected = [first(props, "UNIQ_KEY") or ""]
        expected += (first(props, "KEYS") or "").split(" ")
        for key in filter(None, expected):
            assert physical in store.index.query(f"t#{key}".encode(), 0, 2**62, 1000), key
        indexed = {key_hash(f"t#{key}".encode()) for key in expected if key}
        for name in ("XTAGS", "MY_UNIQ_KEY", "KEYSX"):   # look-alikes are not indexed
            decoy = first(props, name)
            if decoy and key_hash(f"t#{decoy}".encode()) not in indexed:
                assert physical not in store.index.query(f"t#{decoy}".encode(), 0, 2**62, 1000)
    store.shutdown()

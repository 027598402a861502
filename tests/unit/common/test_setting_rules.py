"""Dynamic settings are checked when written, against the rules the services apply."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.common.errors import InvalidArgument
from tidemq.common.setting_rules import (
    READERS,
    check_setting_write,
    parse_quiet_operations,
    setting_name,
)


def test_setting_names_come_from_the_key_layout():
    assert setting_name("/tidemq/config/cluster/c1/retention_hours") == "retention_hours"
    assert setting_name("/tidemq/config/broker/broker-a-0/disk_max_used_ratio") == \
        "disk_max_used_ratio"
    assert setting_name("/tidemq/config/zone/z/retention_hours") is None
    assert setting_name("/tidemq/topics/orders") is None


@pytest.mark.parametrize("key,value", [
    ("/tidemq/config/cluster/c1/disk_max_used_ratio", b"abc"),
    ("/tidemq/config/cluster/c1/disk_max_used_ratio", b"1.5"),
    ("/tidemq/config/group/gateway/breaker_fail_max", b"0"),
    ("/tidemq/config/group/name-server/broker_expiry_s", b"\xff"),
    ("/tidemq/config/cluster/c1/retention_hours", b"-1"),
    ("/tidemq/config/cluster/c1/retention_mb", b"-5"),
    ("/tidemq/config/cluster/c1/trace_quiet_operations", b"Heartbeat,<script>"),
])
def test_values_no_reader_takes_are_refused_with_what_is_legal(key, value):
    with pytest.raises(InvalidArgument) as refused:
        check_setting_write(key, value)
    assert refused.value.code == "INVALID_SETTING" and "nothing was written" in str(refused.value)


def test_a_value_one_reader_takes_is_written():
    check_setting_write("/tidemq/config/cluster/c1/retention_hours", b"0")  # the collector's
    check_setting_write("/tidemq/config/cluster/c1/unknown_setting", b"anything")
    check_setting_write("/tidemq/topics/orders", b"{}")
    check_setting_write("/tidemq/config/group/broker-a/trace_quiet_operations", b"")


def test_quiet_operations_are_names_every_traced_service_follows():
    assert parse_quiet_operations("Heartbeat, Pull  healthz,") == \
        frozenset({"Heartbeat", "Pull", "healthz"})
    assert parse_quiet_operations("") == frozenset()  # trace everything
    with pytest.raises(ValueError, match="not operation names"):
        parse_quiet_operations("Pull /v1/topics")
    readers = {service for service, rules in READERS.items()
               if "trace_quiet_operations" in rules}
    assert readers == {"broker", "name-server", "gateway-http"}  # not the collector


@given(st.sampled_from(sorted({name for rules in READERS.values() for name in rules})),
       st.text(max_size=12))
def test_the_write_check_agrees_with_the_services_rules(name, text):
    key = f"/tidemq/config/cluster/c1/{name}"
    takers = [r for rules in READERS.values() for n, r in rules.items() if n == name]
    if any(r.accepts(text) for r in takers):
        check_setting_write(key, text.encode())
    else:
        with pytest.raises(InvalidArgument):
            check_setting_write(key, text.encode())

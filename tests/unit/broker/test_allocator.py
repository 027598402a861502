"""The broker's heap tuning: applied on glibc, a no-op when disabled."""

from __future__ import annotations

import platform

import pytest
from tidemq.broker.allocator import keep_freed_memory


def test_zero_keeps_the_c_library_defaults():
    assert keep_freed_memory(0) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_glibc_accepts_the_thresholds():
    assert keep_freed_memory(64 << 20) is True

"""The expected-failures file of kafka-python's suite run (tests/integration/kafka/conformance):
every entry has a reason and is listed once, and the committed file parses."""

from __future__ import annotations

import pytest

from tests.integration.kafka.conformance import expected


def test_the_committed_file_parses_and_every_entry_has_a_reason():
    entries = expected.load()
    assert entries and all(reason for reason in entries.values())
    assert all(test_id.startswith("test/integration/") for test_id in entries)


def test_an_entry_without_a_reason_is_refused(tmp_path):
    path = tmp_path / "expected_failures.txt"
    path.write_text("# comment\n\ntest/integration/test_x.py::test_a  # why\n"
                    "test/integration/test_x.py::test_b\n")
    with pytest.raises(pytest.UsageError, match="test_b.*has no reason"):
        expected.load(path)


def test_an_entry_listed_twice_is_refused(tmp_path):
    path = tmp_path / "expected_failures.txt"
    path.write_text("test/integration/test_x.py::test_a  # one\n"
                    "test/integration/test_x.py::test_a  # two\n")
    with pytest.raises(pytest.UsageError, match="listed twice"):
        expected.load(path)

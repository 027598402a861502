"""The expected-failures file of kafka-python's suite run (tests/integration/kafka/conformance):
every entry has a reason and is listed once, the committed file parses, and a run in which no
test passed fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.kafka.conformance import expected

pytest_plugins = ["pytester"]
REPO = Path(expected.__file__).resolve().parents[4]


def _run_with_plugin(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))   # the plugin is the repository's module
    return pytester.runpytest_subprocess("-p", "tests.integration.kafka.conformance.expected",
                                         "-p", "no:randomly")


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


def test_a_run_of_skips_only_fails(pytester, monkeypatch):
    pytester.makepyfile(test_suite="""
        import pytest

        @pytest.mark.skip(reason="no broker")
        def test_a():
            pass
        """)
    result = _run_with_plugin(pytester, monkeypatch)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no test of the suite passed*"])


def test_a_run_with_a_pass_is_green(pytester, monkeypatch):
    pytester.makepyfile(test_suite="""
        def test_a():
            pass
        """)
    result = _run_with_plugin(pytester, monkeypatch)
    assert result.ret == pytest.ExitCode.OK

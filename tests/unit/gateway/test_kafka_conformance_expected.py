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


@pytest.mark.parametrize(("text", "refusal"), [
    pytest.param("# comment\n\ntest/integration/test_x.py::test_a  # why\n"
                 "test/integration/test_x.py::test_b\n", "test_b.*has no reason",
                 id="an entry without a reason"),
    pytest.param("test/integration/test_x.py::test_a  # one\n"
                 "test/integration/test_x.py::test_a  # two\n", "listed twice",
                 id="an entry listed twice"),
])
def test_a_malformed_file_is_refused(tmp_path, text, refusal):
    path = tmp_path / "expected_failures.txt"
    path.write_text(text)
    with pytest.raises(pytest.UsageError, match=refusal):
        expected.load(path)


@pytest.mark.parametrize(("mark", "verdict"), [
    ('@pytest.mark.skip(reason="no broker")', pytest.ExitCode.TESTS_FAILED),
    ("", pytest.ExitCode.OK),
], ids=["a run of skips only fails", "a run with a pass is green"])
def test_a_run_needs_a_passed_test(pytester, monkeypatch, mark, verdict):
    pytester.makepyfile(test_suite=f"import pytest\n\n{mark}\ndef test_a():\n    pass\n")
    result = _run_with_plugin(pytester, monkeypatch)
    assert result.ret == verdict
    if verdict != pytest.ExitCode.OK:
        result.stdout.fnmatch_lines(["*no test of the suite passed*"])

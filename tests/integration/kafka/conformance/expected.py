"""pytest plugin for kafka-python's integration suite run against gateway-kafka: the tests in
expected_failures.txt are marked xfail(strict=True), so one that starts passing fails the run
until its entry is removed (the file may only shrink). Every entry needs its reason; an entry
that names no collected test of a collected file is an error too (a renamed test must not
hide in the file). A run in which no test passed fails: the suite skips its tests when it
finds no broker to test, and a run of skips judged nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

FILE = Path(__file__).with_name("expected_failures.txt")


def load(path: Path = FILE) -> dict[str, str]:
    """test id -> reason. Lines: `<test id>  # <reason>`; blank lines and lines starting with
    `#` are comments."""
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        test_id, _, reason = line.partition(" # ")
        if not reason.strip():
            raise pytest.UsageError(f"{path.name}:{number}: {test_id.strip()!r} has no reason "
                                    "(write `<test id>  # <why it fails against TideMQ>`)")
        if test_id.strip() in entries:
            raise pytest.UsageError(f"{path.name}:{number}: {test_id.strip()!r} is listed twice")
        entries[test_id.strip()] = reason.strip()
    return entries


def pytest_collection_modifyitems(config, items):
    entries = load()
    seen = set()
    for item in items:
        reason = entries.get(item.nodeid)
        if reason is not None:
            seen.add(item.nodeid)
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    if config.getoption("keyword") or config.getoption("markexpr"):
        return   # a selection: entries it leaves out are not missing
    files = {item.nodeid.partition("::")[0] for item in items}
    unknown = sorted(e for e in set(entries) - seen if e.partition("::")[0] in files)
    if unknown:
        raise pytest.UsageError(f"{FILE.name} names tests that were not collected: {unknown}")


class _Tally:
    passed = 0


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and not hasattr(report, "wasxfail"):
        _Tally.passed += 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == pytest.ExitCode.OK and _Tally.passed == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _Tally.passed == 0:
        terminalreporter.write_line("no test of the suite passed (all skipped, expected to "
                                    "fail or deselected): the run judged nothing", red=True)

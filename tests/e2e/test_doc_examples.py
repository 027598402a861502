"""Every shell and Python example of README.md and docs/ runs against a real cluster.

The cluster is the e2e one (Redis, config center, two name servers, two broker groups, the
HTTP gateway, the trace collector) on ephemeral ports; the examples' addresses — the ports of
`make up` — are rewritten to it, and `tidemq` finds it through TIDEMQ_NAMESRV_ADDRS /
TIDEMQ_CONFIG_CENTER. Blocks that cannot run carry a `doc-example: skip REASON` marker
(tests/support/doc_examples.py); the reasons are listed by `test_skipped_examples_say_why`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tidemq.common.polling import poll
from tidemq.common.system_topics import is_system_topic

from tests.support.cluster import traced_cluster
from tests.support.doc_examples import documentation_files, parse, rewrite_addresses

# A page's blocks run a few dozen `tidemq` CLI calls, each a new Python process (~1.5 s of imports
# alone); with three test workers on two cores, README's block of 18 calls took over 120 s once.
# These bound a hang, they measure nothing.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
BLOCK_TIMEOUT_S = 400
PAGES = [path for path in documentation_files(ROOT)
         if any(b.runnable and not b.skip for b in parse(path))]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # Its own cluster, not a shared one: every block starts by deleting every topic.
    with traced_cluster(tmp_path_factory.mktemp("doc-examples")) as cluster:
        cluster.start_gateway(workers=1)
        namesrvs = [n.addr for n in cluster.namesrvs]
        cluster.extra["ports"] = {
            9876: namesrvs[0], 9877: namesrvs[1], 7070: cluster.config_center.addr,
            8080: f"127.0.0.1:{cluster.gateway.port}", 4317: cluster.otlp_endpoint,
            16686: cluster.extra["collector_url"].removeprefix("http://"),
            6379: f"127.0.0.1:{cluster.redis.port}",
            **{port: cluster.brokers[name].addr
               for port, name in ((10911, "broker-a"), (10921, "broker-b"))},
        }
        yield cluster


def _environment(cluster) -> dict[str, str]:
    return {**os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "TIDEMQ_NAMESRV_ADDRS": cluster.namesrv_addrs,
            "TIDEMQ_CONFIG_CENTER": cluster.config_center.addr,
            "PYTHONPATH": str(ROOT)}


def _run(cluster, lang: str, script: str, cwd: Path) -> subprocess.CompletedProcess:
    script = rewrite_addresses(script, cluster.extra["ports"])
    script = script.replace("uv run --frozen ", "").replace("uv run ", "")  # this venv
    command = ([sys.executable, "-c", script] if lang == "python"
               else ["bash", "-e", "-o", "pipefail", "-c", script])
    return subprocess.run(command, cwd=cwd, env=_environment(cluster), capture_output=True,
                          text=True, timeout=BLOCK_TIMEOUT_S)


def _clear(cluster) -> None:
    """Each example starts from a cluster with no topics (nor offsets of them) and no
    subscription-group definitions."""
    from tidemq.client.admin import Admin
    from tidemq.client.config_groups import DefinedGroup

    with Admin(cluster.namesrv_addrs, config_center=cluster.config_center.addr) as admin:
        # ordinary topics first: a pop an earlier example left unacked is then dropped at its
        # revive instead of re-creating the group's retry topic after its deletion
        def delete_all() -> bool:
            names = sorted((t.name for t in admin.list_topics()),
                           key=lambda name: (is_system_topic(name), name))
            for name in names:
                admin.delete_topic(name)
                admin.delete_group_offsets(name)
            return not names or None
        assert poll(delete_all, 60, interval=0), "topics keep coming back"
        for defined in admin.group_definitions():
            admin.delete_group(defined.config.name if isinstance(defined, DefinedGroup)
                               else defined[0])


def _check(block, done: subprocess.CompletedProcess, script: str, expect_failure: bool) -> None:
    failed = done.returncode != 0
    assert failed == expect_failure, (
        f"the example at {block.where} {'failed' if failed else 'succeeded'} (exit "
        f"{done.returncode}), the page says it {'fails' if expect_failure else 'works'}:\n"
        f"{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_examples_of_a_page_run(stack, page, tmp_path):
    ran = 0
    for block in parse(page):
        if not block.runnable or block.skip:
            continue
        _clear(stack)
        for command in block.before:
            _check(block, _run(stack, "bash", command, tmp_path), f"(before) {command}", False)
        if block.lang == "console":
            for command, expect_failure in block.commands():
                _check(block, _run(stack, "bash", command, tmp_path), command, expect_failure)
        else:
            script = block.script()
            _check(block, _run(stack, block.lang, script, tmp_path), script, False)
        ran += 1
    assert ran


def test_skipped_examples_say_why():
    """Not a run: the list of what is not run, each with its reason (shown with -rA / -v)."""
    skipped = [(b.where, b.skip) for path in documentation_files(ROOT) for b in parse(path)
               if b.runnable and b.skip]
    for where, reason in skipped:
        print(f"{where}: not run: {reason}")
    assert all(reason for _, reason in skipped)

"""Acceptance: linearizable compare-and-set under contention across config-center instances."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tidemq.configclient.client import ConfigClient

PROCESSES, INCREMENTS = 8, 200


@pytest.mark.slow
def test_eight_processes_cas_increment_one_counter_through_different_instances(
        start_config_center, config_center):
    instances = [config_center, start_config_center(), start_config_center()]
    worker = Path(__file__).with_name("cas_worker.py")
    procs = [
        subprocess.Popen([sys.executable, str(worker), instances[i % len(instances)].addr,
                          "/counter", str(INCREMENTS)], stdout=subprocess.PIPE, text=True)
        for i in range(PROCESSES)
    ]
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        reports.append(json.loads(out))
    revisions = [rev for report in reports for rev in report["revisions"]]
    assert len(revisions) == PROCESSES * INCREMENTS
    assert len(set(revisions)) == len(revisions), "two increments share a revision"
    with ConfigClient(config_center.addr) as client:
        counter = client.get("/counter")
        assert counter.text == str(PROCESSES * INCREMENTS)
        assert counter.version == PROCESSES * INCREMENTS
        # Every write was a successful increment: consecutive revisions with none missing
        # (etcd's first write is revision 2).
        first = min(revisions)
        assert sorted(revisions) == list(range(first, first + PROCESSES * INCREMENTS))
        history = client.history("/counter", limit=50)
        assert [int(e.kv.text) for e in history] == list(range(1551, 1601))
    print(f"conflicts retried: {sum(r['conflicts'] for r in reports)}")

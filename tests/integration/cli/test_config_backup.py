"""`tidemq config export` / `import` between two real clusters' config centers: binary
values survive, leased keys stay behind, existing keys are left unless --overwrite, and a
broken document is refused before anything is written."""

from __future__ import annotations

import json

import pytest
from tidemq.client.cli import app
from tidemq.configclient.client import ConfigClient
from typer.testing import CliRunner

from tests.support.etcd import start_etcd


@pytest.fixture
def two_centers(services, tmp_path):
    clusters = [start_etcd(tmp_path / name) for name in ("source", "target")]
    try:
        yield [services("tidemq.configcenter", ["--etcd-endpoints", c.endpoints])
               for c in clusters]
    finally:
        for cluster in clusters:
            cluster.kill()


def test_export_then_import_moves_every_definition(two_centers, tmp_path):
    source, target = two_centers
    runner = CliRunner()
    with ConfigClient(source.addr) as client:
        client.put("/tidemq/topics/orders", {"name": "orders", "queues": 4})
        client.put("/tidemq/config/cluster/c1/binary", b"\x00\xff\x10")
        lease = client.lease(30)
        client.put("/tidemq/brokers/live/b1", "ephemeral", lease=lease.id)
        client.put("/elsewhere", "not exported")
    exported = tmp_path / "export.json"
    shown = runner.invoke(app, ["config", "export", "--out", str(exported),
                                "--config-center", source.addr])
    assert shown.exit_code == 0, shown.output
    assert "exported 2 keys under /tidemq/" in shown.stderr
    assert {e["key"] for e in json.loads(exported.read_text())["keys"]} == {
        "/tidemq/topics/orders", "/tidemq/config/cluster/c1/binary"}

    with ConfigClient(target.addr) as client:
        client.put("/tidemq/topics/orders", "target's own")
        imported = runner.invoke(app, ["config", "import", str(exported),
                                       "--config-center", target.addr])
        assert imported.exit_code == 0, imported.output
        assert "1 keys written, 1 left as they were" in imported.stderr
        assert client.get("/tidemq/topics/orders").text == "target's own"
        assert client.get("/tidemq/config/cluster/c1/binary").value == b"\x00\xff\x10"
        replaced = runner.invoke(app, ["config", "import", str(exported), "--overwrite",
                                       "--config-center", target.addr])
        assert replaced.exit_code == 0 and "2 keys written" in replaced.stderr
        assert client.get("/tidemq/topics/orders").json() == {"name": "orders", "queues": 4}
        assert client.get("/tidemq/brokers/live/b1") is None

        broken = tmp_path / "broken.json"
        broken.write_text(json.dumps({"format": "tidemq-config-export/1", "keys": [
            {"key": "/tidemq/a", "value_b64": "YQ=="}, {"key": "no-slash", "value_b64": ""}]}))
        refused = runner.invoke(app, ["config", "import", str(broken),
                                      "--config-center", target.addr])
        assert refused.exit_code == 1
        assert refused.stderr.startswith("error INVALID_ARGUMENT: entry 1 of the export")
        assert client.get("/tidemq/a") is None  # checked whole before anything was written

"""`make up` tells the `tidemq` command where the trace collector listens: a file under
`.data/run/` that the command finds from the checkout (tidemq.client.client_tracing)."""

from __future__ import annotations

from deploy.local import LocalDeployment
from deploy.topology import load


def test_the_rendered_deployment_names_the_collector_for_the_command(tmp_path):
    topology = load()
    deployment = LocalDeployment(data_dir=tmp_path / ".data", port_offset=1000,
                                 topology=topology)
    deployment._write_config({})
    collector = deployment.placement.addr(topology.services[topology.tracing])
    assert collector.endswith(":5317")  # 4317 + the offset
    # what tidemq.client.client_tracing reads (tests/unit/client/test_client_tracing.py)
    assert (tmp_path / ".data/run/otlp-endpoint").read_text().strip() == collector

"""`make status`'s config-center lines: each instance asked DescribeStore on its own, one that
does not answer shown DOWN (a real gRPC server answering with a hand-built reply stands in for
the config center's servicer)."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
import yaml
from tidemq.v1 import config_pb2 as pb
from tidemq.v1 import config_pb2_grpc

from deploy.local import config_center_lines
from deploy.topology import TOPOLOGY_FILE, Placement, parse
from tests.support.processes import free_port


class Describing(config_pb2_grpc.ConfigServiceServicer):
    def DescribeStore(self, request, context):
        return pb.DescribeStoreResponse(
            advertised_addr="127.0.0.1", version="0.1.0",
            target="etcd 127.0.0.1:2379,127.0.0.1:2381,127.0.0.1:2383", revision=77,
            leader="etcd-2", members=[pb.EtcdMember(name="etcd-2", reachable=True, leader=True)])


@pytest.fixture
def config_center():
    server = grpc.server(futures.ThreadPoolExecutor(2))
    config_pb2_grpc.add_ConfigServiceServicer_to_server(Describing(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


def test_each_config_center_is_shown_up_with_its_store_or_down(config_center):
    topology = parse(yaml.safe_load(TOPOLOGY_FILE.read_text()))
    centers = topology.members("config-center")
    down = free_port()
    placement = Placement(port_overrides={f"{centers[0].name}.grpc": config_center,
                                          f"{centers[1].name}.grpc": down})
    lines = config_center_lines(topology, placement, timeout=2)
    assert lines[0] == "Config centers:"
    first, second = lines[1:]
    assert first.split()[:3] == ["config-center-1", f"127.0.0.1:{config_center}", "up"]
    assert ("version 0.1.0, store etcd 127.0.0.1:2379,127.0.0.1:2381,127.0.0.1:2383, "
            "leader etcd-2, revision 77") in first
    assert second.split()[:3] == ["config-center-2", f"127.0.0.1:{down}", "DOWN"]

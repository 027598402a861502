"""The analytics tests' view of the shared test cluster (tests.support.cluster, one broker
group) and helpers to create topics and send tagged records over BrokerService.Send."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common import record as rec
from tidemq.common.rpc import RpcClient
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.topics import TOPIC_PREFIX, TopicConfig
from tidemq.v1 import broker_pb2, broker_pb2_grpc, common_pb2

from tests.support.cluster import Cluster, wait_for_route
from tests.support.processes import ServiceProcess, wait_until

BROKER = "broker-a"


@dataclass
class AnalyticsCluster:
    cluster: Cluster

    @property
    def namesrv(self) -> ServiceProcess:
        return self.cluster.namesrvs[0]

    @property
    def broker(self) -> ServiceProcess:
        return self.cluster.brokers[BROKER]

    def broker_client(self) -> RpcClient:
        return RpcClient(self.broker.addr, broker_pb2_grpc.BrokerServiceStub, timeout=10)

    def create_topic(self, name: str, queues: int) -> None:
        """Define the topic in config-center (again: idempotent) and wait until it is routed."""
        with ConfigClient(self.cluster.config_center.addr) as config:
            config.put(TOPIC_PREFIX + name, TopicConfig(name, queues).to_json())
        wait_for_route(self.cluster, name, 1)

    def queue_ends(self, topic: str) -> dict[int, int]:
        reply = self.broker_client().call(
            "GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic=topic))
        return {q.queue_id: q.max_offset for q in reply.queues}

    def send(self, topic: str, per_queue: dict[int, list[bytes]], batch: int = 50) -> None:
        """Send encoded records queue by queue in batches; wait until all are dispatched."""
        client = self.broker_client()
        before = self.queue_ends(topic)
        for queue_id, records in per_queue.items():
            for i in range(0, len(records), batch):
                chunk = records[i:i + batch]
                reply = client.call("Send", broker_pb2.SendRequest(
                    topic=topic, queue_id=queue_id, records=b"".join(chunk),
                    record_count=len(chunk)))
                assert reply.status == common_pb2.SEND_OK
        target = {q: before.get(q, 0) + len(records) for q, records in per_queue.items()}

        def dispatched() -> bool:  # the ConsumeQueue is built asynchronously from the CommitLog
            ends = self.queue_ends(topic)
            return all(ends.get(q, 0) == n for q, n in target.items())

        wait_until(dispatched, 30, message=f"{topic} dispatched")


def tagged(topic: str, tag: str, n: int) -> bytes:
    message = rec.OutgoingMessage(topic, f"{tag or 'untagged'}-{n}".encode(), tags=tag,
                                  keys=[f"k{n}", "all"], properties={"seq": str(n)})
    return rec.encode_message(message)[0]



"""NameServerService over gRPC: proto <-> RouteRegistry (and the replication Controller when
this name server runs one), nothing else."""

from __future__ import annotations

from prometheus_client import Counter, Gauge
from tidemq.common import errors
from tidemq.nameserver.registry import (
    BrokerData,
    DataVersion,
    Registration,
    RouteRegistry,
    TopicConfig,
)
from tidemq.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc

REGISTRATIONS = Counter("tidemq_nameserver_registrations_total", "RegisterBroker calls answered")
ROUTE_QUERIES = Counter("tidemq_nameserver_route_queries_total", "GetRouteInfo calls received")
ROLE_NAMES = {nameserver_pb2.REPLICA_MASTER: "MASTER", nameserver_pb2.REPLICA_SLAVE: "SLAVE"}
ROLE_VALUES = {name: value for value, name in ROLE_NAMES.items()}
LIVE_BROKERS = Gauge("tidemq_nameserver_live_brokers", "Brokers currently registered")


def registration_from_proto(request: nameserver_pb2.RegisterBrokerRequest) -> Registration:
    return Registration(
        cluster_name=request.cluster_name,
        broker_name=request.broker_name,
        broker_id=request.broker_id,
        broker_addr=request.broker_addr,
        ha_server_addr=request.ha_server_addr,
        data_version=DataVersion(request.data_version.timestamp, request.data_version.counter),
        topics=tuple(
            TopicConfig(t.topic_name, t.read_queue_nums, t.write_queue_nums, t.perm,
                        t.topic_sys_flag, t.order)
            for t in request.topics
        ),
        replica_id=request.replica_id,
        role=ROLE_NAMES.get(request.role, ""),
        epoch=request.epoch,
        wire_port=request.wire_port,
        wire_tls=request.wire_tls,
    )


def _broker_data_pb(data: BrokerData) -> nameserver_pb2.BrokerData:
    return nameserver_pb2.BrokerData(
        cluster=data.cluster, broker_name=data.broker_name, broker_addrs=data.broker_addrs,
        wire_ports={addr: nameserver_pb2.WirePort(port=port, tls=tls)
                    for addr, (port, tls) in data.wire_ports.items()},
    )


def _group_pb(broker_name: str, state) -> nameserver_pb2.ReplicationGroup:
    return nameserver_pb2.ReplicationGroup(
        broker_name=broker_name, master=state.master, epoch=state.epoch,
        in_sync=sorted(state.in_sync), master_addr=state.master_addr,
        master_ha_addr=state.master_ha_addr, incarnations=dict(state.incarnations),
        confirmed_offset=state.confirmed_offset, waiting_for=sorted(state.waiting_for))


class NameServerServicer(nameserver_pb2_grpc.NameServerServiceServicer):
    def __init__(self, registry: RouteRegistry, controller=None) -> None:
        self.registry = registry
        self.controller = controller  # tidemq.nameserver.controller.service.Controller | None
        LIVE_BROKERS.set_function(lambda: len(registry.broker_live_table))

    def RegisterBroker(self, request, context):
        result = self.registry.register(registration_from_proto(request))
        REGISTRATIONS.inc()
        return nameserver_pb2.RegisterBrokerResponse(
            master_addr=result.master_addr, ha_server_addr=result.ha_server_addr
        )

    def UnregisterBroker(self, request, context):
        self.registry.unregister(request.cluster_name, request.broker_name, request.broker_id,
                                 request.broker_addr)
        return nameserver_pb2.UnregisterBrokerResponse()

    def GetRouteInfo(self, request, context):
        ROUTE_QUERIES.inc()
        route = self.registry.route(request.topic)
        return nameserver_pb2.TopicRouteData(
            queue_datas=[
                nameserver_pb2.QueueData(
                    broker_name=q.broker_name, read_queue_nums=q.read_queue_nums,
                    write_queue_nums=q.write_queue_nums, perm=q.perm,
                    topic_sys_flag=q.topic_sys_flag,
                )
                for q in route.queue_datas
            ],
            broker_datas=[_broker_data_pb(b) for b in route.broker_datas],
            order_topic_conf=route.order_topic_conf,
        )

    def GetClusterInfo(self, request, context):
        snapshot = self.registry.cluster_info()
        return nameserver_pb2.ClusterInfo(
            broker_addr_table={n: _broker_data_pb(b) for n, b in snapshot.broker_addr_table.items()},
            cluster_addr_table={
                c: nameserver_pb2.BrokerNames(broker_names=sorted(names))
                for c, names in snapshot.cluster_addr_table.items()
            },
            live_brokers=[
                nameserver_pb2.BrokerLiveInfo(
                    broker_addr=addr, last_update_ms=live.last_update_ms,
                    data_version=common_pb2.DataVersion(
                        timestamp=live.data_version.timestamp, counter=live.data_version.counter
                    ),
                    ha_server_addr=live.ha_server_addr, broker_name=live.broker_name,
                    broker_id=live.broker_id, replica_id=live.replica_id,
                    role=ROLE_VALUES.get(live.role, nameserver_pb2.REPLICA_ROLE_UNSPECIFIED),
                    epoch=live.epoch, wire_port=live.wire_port, wire_tls=live.wire_tls,
                )
                for addr, live in sorted(snapshot.live_brokers.items())
            ],
        )

    def GetAllTopics(self, request, context):
        return nameserver_pb2.TopicList(topics=self.registry.topics())

    # -- replication controller -----------------------------------------------------------

    def _controller(self):
        if self.controller is None:
            raise errors.PreconditionFailed(
                "this name server runs no replication controller (it needs --config-center "
                "and controller_enabled)", code="NOT_CONTROLLER")
        return self.controller

    @staticmethod
    def _broker_name(request) -> str:
        if not request.broker_name:
            raise errors.InvalidArgument("broker_name is required")
        return request.broker_name

    def AlterInSyncSet(self, request, context):
        name = self._broker_name(request)
        if any(not incarnation for incarnation in request.incarnations.values()):
            raise errors.InvalidArgument("incarnations must not hold an empty incarnation")
        state = self._controller().alter_in_sync(name, request.epoch, request.master,
                                                 list(request.in_sync),
                                                 dict(request.incarnations))
        return nameserver_pb2.AlterInSyncSetResponse(group=_group_pb(name, state))

    def ElectMaster(self, request, context):
        name = self._broker_name(request)
        if request.preferred_replica < -1:
            raise errors.InvalidArgument(
                f"preferred_replica must be a replica id or -1, got {request.preferred_replica}")
        preferred = None if request.preferred_replica == -1 else request.preferred_replica
        state = self._controller().elect_master(name, preferred, unclean=request.unclean)
        return nameserver_pb2.ElectMasterResponse(group=_group_pb(name, state))

    def DescribeReplication(self, request, context):
        described = self._controller().describe()
        return nameserver_pb2.DescribeReplicationResponse(
            groups=[_group_pb(name, state) for name, state in sorted(described.groups.items())],
            live_replicas=[
                nameserver_pb2.LiveReplica(
                    broker_name=name, replica_id=replica.replica_id, addr=replica.addr,
                    ha_addr=replica.ha_addr, epoch=replica.epoch, log_end=replica.log_end,
                    incarnation=replica.incarnation)
                for name, replicas in sorted(described.live.items())
                for _, replica in sorted(replicas.items())
            ],
            controller_addr=described.controller_addr)

from tidemq.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICA_ROLE_UNSPECIFIED: _ClassVar[ReplicaRole]
    REPLICA_MASTER: _ClassVar[ReplicaRole]
    REPLICA_SLAVE: _ClassVar[ReplicaRole]
REPLICA_ROLE_UNSPECIFIED: ReplicaRole
REPLICA_MASTER: ReplicaRole
REPLICA_SLAVE: ReplicaRole

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "ha_server_addr", "data_version", "topics", "wire_port", "wire_tls", "replica_id", "role", "epoch")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    WIRE_PORT_FIELD_NUMBER: _ClassVar[int]
    WIRE_TLS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str
    data_version: _common_pb2.DataVersion
    topics: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicConfig]
    wire_port: int
    wire_tls: bool
    replica_id: int
    role: ReplicaRole
    epoch: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ..., data_version: _Optional[_Union[_common_pb2.DataVersion, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[_common_pb2.TopicConfig, _Mapping]]] = ..., wire_port: _Optional[int] = ..., wire_tls: _Optional[bool] = ..., replica_id: _Optional[int] = ..., role: _Optional[_Union[ReplicaRole, str]] = ..., epoch: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("master_addr", "ha_server_addr")
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    master_addr: str
    ha_server_addr: str
    def __init__(self, master_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetRouteInfoRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class QueueData(_message.Message):
    __slots__ = ("broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    def __init__(self, broker_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ...) -> None: ...

class BrokerData(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_addrs", "wire_ports")
    class BrokerAddrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    class WirePortsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: WirePort
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[WirePort, _Mapping]] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    WIRE_PORTS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_addrs: _containers.ScalarMap[int, str]
    wire_ports: _containers.MessageMap[str, WirePort]
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_addrs: _Optional[_Mapping[int, str]] = ..., wire_ports: _Optional[_Mapping[str, WirePort]] = ...) -> None: ...

class WirePort(_message.Message):
    __slots__ = ("port", "tls")
    PORT_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    port: int
    tls: bool
    def __init__(self, port: _Optional[int] = ..., tls: _Optional[bool] = ...) -> None: ...

class TopicRouteData(_message.Message):
    __slots__ = ("queue_datas", "broker_datas", "order_topic_conf")
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    BROKER_DATAS_FIELD_NUMBER: _ClassVar[int]
    ORDER_TOPIC_CONF_FIELD_NUMBER: _ClassVar[int]
    queue_datas: _containers.RepeatedCompositeFieldContainer[QueueData]
    broker_datas: _containers.RepeatedCompositeFieldContainer[BrokerData]
    order_topic_conf: str
    def __init__(self, queue_datas: _Optional[_Iterable[_Union[QueueData, _Mapping]]] = ..., broker_datas: _Optional[_Iterable[_Union[BrokerData, _Mapping]]] = ..., order_topic_conf: _Optional[str] = ...) -> None: ...

class GetClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerNames(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class BrokerLiveInfo(_message.Message):
    __slots__ = ("broker_addr", "last_update_ms", "data_version", "ha_server_addr", "broker_name", "broker_id", "replica_id", "role", "epoch", "wire_port", "wire_tls")
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_MS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    WIRE_PORT_FIELD_NUMBER: _ClassVar[int]
    WIRE_TLS_FIELD_NUMBER: _ClassVar[int]
    broker_addr: str
    last_update_ms: int
    data_version: _common_pb2.DataVersion
    ha_server_addr: str
    broker_name: str
    broker_id: int
    replica_id: int
    role: ReplicaRole
    epoch: int
    wire_port: int
    wire_tls: bool
    def __init__(self, broker_addr: _Optional[str] = ..., last_update_ms: _Optional[int] = ..., data_version: _Optional[_Union[_common_pb2.DataVersion, _Mapping]] = ..., ha_server_addr: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., replica_id: _Optional[int] = ..., role: _Optional[_Union[ReplicaRole, str]] = ..., epoch: _Optional[int] = ..., wire_port: _Optional[int] = ..., wire_tls: _Optional[bool] = ...) -> None: ...

class ClusterInfo(_message.Message):
    __slots__ = ("broker_addr_table", "cluster_addr_table", "live_brokers")
    class BrokerAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BrokerData
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BrokerData, _Mapping]] = ...) -> None: ...
    class ClusterAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BrokerNames
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BrokerNames, _Mapping]] = ...) -> None: ...
    BROKER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    LIVE_BROKERS_FIELD_NUMBER: _ClassVar[int]
    broker_addr_table: _containers.MessageMap[str, BrokerData]
    cluster_addr_table: _containers.MessageMap[str, BrokerNames]
    live_brokers: _containers.RepeatedCompositeFieldContainer[BrokerLiveInfo]
    def __init__(self, broker_addr_table: _Optional[_Mapping[str, BrokerData]] = ..., cluster_addr_table: _Optional[_Mapping[str, BrokerNames]] = ..., live_brokers: _Optional[_Iterable[_Union[BrokerLiveInfo, _Mapping]]] = ...) -> None: ...

class GetAllTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopicList(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplicationGroup(_message.Message):
    __slots__ = ("broker_name", "master", "epoch", "in_sync", "master_addr", "master_ha_addr", "incarnations", "confirmed_offset", "waiting_for")
    class IncarnationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    MASTER_HA_ADDR_FIELD_NUMBER: _ClassVar[int]
    INCARNATIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WAITING_FOR_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    master: int
    epoch: int
    in_sync: _containers.RepeatedScalarFieldContainer[int]
    master_addr: str
    master_ha_addr: str
    incarnations: _containers.ScalarMap[int, str]
    confirmed_offset: int
    waiting_for: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, broker_name: _Optional[str] = ..., master: _Optional[int] = ..., epoch: _Optional[int] = ..., in_sync: _Optional[_Iterable[int]] = ..., master_addr: _Optional[str] = ..., master_ha_addr: _Optional[str] = ..., incarnations: _Optional[_Mapping[int, str]] = ..., confirmed_offset: _Optional[int] = ..., waiting_for: _Optional[_Iterable[int]] = ...) -> None: ...

class LiveReplica(_message.Message):
    __slots__ = ("broker_name", "replica_id", "addr", "ha_addr", "epoch", "log_end", "incarnation")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_ADDR_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_END_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    replica_id: int
    addr: str
    ha_addr: str
    epoch: int
    log_end: int
    incarnation: str
    def __init__(self, broker_name: _Optional[str] = ..., replica_id: _Optional[int] = ..., addr: _Optional[str] = ..., ha_addr: _Optional[str] = ..., epoch: _Optional[int] = ..., log_end: _Optional[int] = ..., incarnation: _Optional[str] = ...) -> None: ...

class AlterInSyncSetRequest(_message.Message):
    __slots__ = ("broker_name", "epoch", "master", "in_sync", "incarnations")
    class IncarnationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    INCARNATIONS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    epoch: int
    master: int
    in_sync: _containers.RepeatedScalarFieldContainer[int]
    incarnations: _containers.ScalarMap[int, str]
    def __init__(self, broker_name: _Optional[str] = ..., epoch: _Optional[int] = ..., master: _Optional[int] = ..., in_sync: _Optional[_Iterable[int]] = ..., incarnations: _Optional[_Mapping[int, str]] = ...) -> None: ...

class AlterInSyncSetResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: ReplicationGroup
    def __init__(self, group: _Optional[_Union[ReplicationGroup, _Mapping]] = ...) -> None: ...

class ElectMasterRequest(_message.Message):
    __slots__ = ("broker_name", "preferred_replica", "unclean")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_REPLICA_FIELD_NUMBER: _ClassVar[int]
    UNCLEAN_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    preferred_replica: int
    unclean: bool
    def __init__(self, broker_name: _Optional[str] = ..., preferred_replica: _Optional[int] = ..., unclean: _Optional[bool] = ...) -> None: ...

class ElectMasterResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: ReplicationGroup
    def __init__(self, group: _Optional[_Union[ReplicationGroup, _Mapping]] = ...) -> None: ...

class DescribeReplicationRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeReplicationResponse(_message.Message):
    __slots__ = ("groups", "live_replicas", "controller_addr")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    LIVE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ADDR_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[ReplicationGroup]
    live_replicas: _containers.RepeatedCompositeFieldContainer[LiveReplica]
    controller_addr: str
    def __init__(self, groups: _Optional[_Iterable[_Union[ReplicationGroup, _Mapping]]] = ..., live_replicas: _Optional[_Iterable[_Union[LiveReplica, _Mapping]]] = ..., controller_addr: _Optional[str] = ...) -> None: ...

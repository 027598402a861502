from tidemq.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PullStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FOUND: _ClassVar[PullStatus]
    NO_NEW_MSG: _ClassVar[PullStatus]
    NO_MATCHED_MSG: _ClassVar[PullStatus]
    OFFSET_ILLEGAL: _ClassVar[PullStatus]

class ConsumeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSUME_TYPE_UNSPECIFIED: _ClassVar[ConsumeType]
    CONSUME_PUSH: _ClassVar[ConsumeType]
    CONSUME_PULL: _ClassVar[ConsumeType]
    CONSUME_POP: _ClassVar[ConsumeType]

class TransactionResolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_UNKNOWN: _ClassVar[TransactionResolution]
    TRANSACTION_COMMIT: _ClassVar[TransactionResolution]
    TRANSACTION_ROLLBACK: _ClassVar[TransactionResolution]
FOUND: PullStatus
NO_NEW_MSG: PullStatus
NO_MATCHED_MSG: PullStatus
OFFSET_ILLEGAL: PullStatus
CONSUME_TYPE_UNSPECIFIED: ConsumeType
CONSUME_PUSH: ConsumeType
CONSUME_PULL: ConsumeType
CONSUME_POP: ConsumeType
TRANSACTION_UNKNOWN: TransactionResolution
TRANSACTION_COMMIT: TransactionResolution
TRANSACTION_ROLLBACK: TransactionResolution

class SendRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "records", "record_count", "transaction_prepared", "scheduled", "producer_id", "idempotent", "sequence")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_PREPARED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    records: bytes
    record_count: int
    transaction_prepared: bool
    scheduled: bool
    producer_id: str
    idempotent: bool
    sequence: ProducerSequence
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., records: _Optional[bytes] = ..., record_count: _Optional[int] = ..., transaction_prepared: _Optional[bool] = ..., scheduled: _Optional[bool] = ..., producer_id: _Optional[str] = ..., idempotent: _Optional[bool] = ..., sequence: _Optional[_Union[ProducerSequence, _Mapping]] = ...) -> None: ...

class ProducerSequence(_message.Message):
    __slots__ = ("producer_id", "epoch", "base_sequence")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BASE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    epoch: int
    base_sequence: int
    def __init__(self, producer_id: _Optional[int] = ..., epoch: _Optional[int] = ..., base_sequence: _Optional[int] = ...) -> None: ...

class RecallMessageRequest(_message.Message):
    __slots__ = ("topic", "unique_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    unique_id: str
    def __init__(self, topic: _Optional[str] = ..., unique_id: _Optional[str] = ...) -> None: ...

class RecallMessageResponse(_message.Message):
    __slots__ = ("delivery_ms",)
    DELIVERY_MS_FIELD_NUMBER: _ClassVar[int]
    delivery_ms: int
    def __init__(self, delivery_ms: _Optional[int] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("status", "broker_name", "queue_id", "first_queue_offset", "physical_offsets", "store_host", "store_timestamp_ms", "duplicates", "queue_offsets", "throttle_time_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    status: _common_pb2.SendStatus
    broker_name: str
    queue_id: int
    first_queue_offset: int
    physical_offsets: _containers.RepeatedScalarFieldContainer[int]
    store_host: bytes
    store_timestamp_ms: int
    duplicates: int
    queue_offsets: _containers.RepeatedScalarFieldContainer[int]
    throttle_time_ms: int
    def __init__(self, status: _Optional[_Union[_common_pb2.SendStatus, str]] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., first_queue_offset: _Optional[int] = ..., physical_offsets: _Optional[_Iterable[int]] = ..., store_host: _Optional[bytes] = ..., store_timestamp_ms: _Optional[int] = ..., duplicates: _Optional[int] = ..., queue_offsets: _Optional[_Iterable[int]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "queue_offset", "max_messages", "max_bytes", "suspend_timeout_ms", "tag_expression", "broadcasting", "expression_type")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TAG_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    BROADCASTING_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_messages: int
    max_bytes: int
    suspend_timeout_ms: int
    tag_expression: str
    broadcasting: bool
    expression_type: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_messages: _Optional[int] = ..., max_bytes: _Optional[int] = ..., suspend_timeout_ms: _Optional[int] = ..., tag_expression: _Optional[str] = ..., broadcasting: _Optional[bool] = ..., expression_type: _Optional[str] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "records", "record_count", "suggest_pull_from_slave", "suggested_broker_id", "throttle_time_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEGIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    SUGGEST_PULL_FROM_SLAVE_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: bytes
    record_count: int
    suggest_pull_from_slave: bool
    suggested_broker_id: int
    throttle_time_ms: int
    def __init__(self, status: _Optional[_Union[PullStatus, str]] = ..., next_begin_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., record_count: _Optional[int] = ..., suggest_pull_from_slave: _Optional[bool] = ..., suggested_broker_id: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class GetQueueOffsetsRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class QueueOffsets(_message.Message):
    __slots__ = ("queue_id", "min_offset", "max_offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_offset: int
    max_offset: int
    def __init__(self, queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ...) -> None: ...

class GetQueueOffsetsResponse(_message.Message):
    __slots__ = ("broker_name", "queues")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueOffsets]
    def __init__(self, broker_name: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueOffsets, _Mapping]]] = ...) -> None: ...

class SearchOffsetRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class SearchOffsetResponse(_message.Message):
    __slots__ = ("queue_offset", "store_timestamp_ms")
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    queue_offset: int
    store_timestamp_ms: int
    def __init__(self, queue_offset: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ...) -> None: ...

class ViewMessageRequest(_message.Message):
    __slots__ = ("physical_offset",)
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    physical_offset: int
    def __init__(self, physical_offset: _Optional[int] = ...) -> None: ...

class ViewMessageResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: bytes
    def __init__(self, record: _Optional[bytes] = ...) -> None: ...

class QueryMessageByKeyRequest(_message.Message):
    __slots__ = ("topic", "key", "begin_timestamp_ms", "end_timestamp_ms", "max_results")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    begin_timestamp_ms: int
    end_timestamp_ms: int
    max_results: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ..., max_results: _Optional[int] = ...) -> None: ...

class QueryMessageByKeyResponse(_message.Message):
    __slots__ = ("records", "record_count")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    records: bytes
    record_count: int
    def __init__(self, records: _Optional[bytes] = ..., record_count: _Optional[int] = ...) -> None: ...

class GetBrokerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBrokerInfoResponse(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "topics", "commitlog_min_offset", "commitlog_max_offset", "wire_port", "consumed", "wire_tls", "throttled", "replica_id", "role", "epoch", "confirmed_offset", "replicas")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    COMMITLOG_MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITLOG_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WIRE_PORT_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    WIRE_TLS_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    topics: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicConfig]
    commitlog_min_offset: int
    commitlog_max_offset: int
    wire_port: int
    consumed: _containers.RepeatedCompositeFieldContainer[TopicCount]
    wire_tls: bool
    throttled: _containers.RepeatedCompositeFieldContainer[ThrottledEntity]
    replica_id: int
    role: str
    epoch: int
    confirmed_offset: int
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaProgress]
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[_common_pb2.TopicConfig, _Mapping]]] = ..., commitlog_min_offset: _Optional[int] = ..., commitlog_max_offset: _Optional[int] = ..., wire_port: _Optional[int] = ..., consumed: _Optional[_Iterable[_Union[TopicCount, _Mapping]]] = ..., wire_tls: _Optional[bool] = ..., throttled: _Optional[_Iterable[_Union[ThrottledEntity, _Mapping]]] = ..., replica_id: _Optional[int] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[ReplicaProgress, _Mapping]]] = ...) -> None: ...

class ThrottledEntity(_message.Message):
    __slots__ = ("quota", "entity", "owed_ms")
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    OWED_MS_FIELD_NUMBER: _ClassVar[int]
    quota: str
    entity: str
    owed_ms: int
    def __init__(self, quota: _Optional[str] = ..., entity: _Optional[str] = ..., owed_ms: _Optional[int] = ...) -> None: ...

class TopicCount(_message.Message):
    __slots__ = ("topic", "count")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    count: int
    def __init__(self, topic: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("replica_id", "log_end", "lag_bytes", "lag_ms", "in_sync", "rebuilding")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAG_MS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    REBUILDING_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    log_end: int
    lag_bytes: int
    lag_ms: int
    in_sync: bool
    rebuilding: bool
    def __init__(self, replica_id: _Optional[int] = ..., log_end: _Optional[int] = ..., lag_bytes: _Optional[int] = ..., lag_ms: _Optional[int] = ..., in_sync: _Optional[bool] = ..., rebuilding: _Optional[bool] = ...) -> None: ...

class GetAllConsumerOffsetsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GroupOffsets(_message.Message):
    __slots__ = ("consumer_group", "offsets")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, consumer_group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class GetAllConsumerOffsetsResponse(_message.Message):
    __slots__ = ("groups", "coordinated_groups")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    COORDINATED_GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupOffsets]
    coordinated_groups: _containers.RepeatedCompositeFieldContainer[GroupHandover]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupOffsets, _Mapping]]] = ..., coordinated_groups: _Optional[_Iterable[_Union[GroupHandover, _Mapping]]] = ...) -> None: ...

class GroupHandover(_message.Message):
    __slots__ = ("group_id", "generation_id", "protocol_type", "protocol_name", "leader_id", "members")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader_id: str
    members: _containers.RepeatedCompositeFieldContainer[MemberHandover]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., leader_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[MemberHandover, _Mapping]]] = ...) -> None: ...

class MemberHandover(_message.Message):
    __slots__ = ("member_id", "client_id", "client_host", "session_timeout_ms", "rebalance_timeout_ms", "protocols", "assignment", "client_software")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: _containers.RepeatedCompositeFieldContainer[GroupProtocol]
    assignment: bytes
    client_software: str
    def __init__(self, member_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., protocols: _Optional[_Iterable[_Union[GroupProtocol, _Mapping]]] = ..., assignment: _Optional[bytes] = ..., client_software: _Optional[str] = ...) -> None: ...

class QueueOffset(_message.Message):
    __slots__ = ("topic", "queue_id", "offset", "metadata")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    metadata: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class CommitOffsetsRequest(_message.Message):
    __slots__ = ("consumer_group", "offsets", "generation_id", "member_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    generation_id: int
    member_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ...) -> None: ...

class CommitOffsetsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueryOffsetsRequest(_message.Message):
    __slots__ = ("consumer_group", "topic")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueryOffsetsResponse(_message.Message):
    __slots__ = ("offsets", "pops")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    POPS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    pops: _containers.RepeatedCompositeFieldContainer[PopProgress]
    def __init__(self, offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ..., pops: _Optional[_Iterable[_Union[PopProgress, _Mapping]]] = ...) -> None: ...

class PopProgress(_message.Message):
    __slots__ = ("topic", "queue_id", "next_offset", "unacked")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    UNACKED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    next_offset: int
    unacked: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., next_offset: _Optional[int] = ..., unacked: _Optional[int] = ...) -> None: ...

class ResetOffsetsRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "timestamp_ms")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    timestamp_ms: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class ResetOffsetsResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class DeleteOffsetsRequest(_message.Message):
    __slots__ = ("topic", "consumer_group")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    consumer_group: str
    def __init__(self, topic: _Optional[str] = ..., consumer_group: _Optional[str] = ...) -> None: ...

class DeleteOffsetsResponse(_message.Message):
    __slots__ = ("consumer_groups",)
    CONSUMER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    consumer_groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, consumer_groups: _Optional[_Iterable[str]] = ...) -> None: ...

class GroupProtocol(_message.Message):
    __slots__ = ("name", "metadata")
    NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    metadata: bytes
    def __init__(self, name: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "session_timeout_ms", "rebalance_timeout_ms", "client_id", "client_host", "protocols", "client_software")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    protocols: _containers.RepeatedCompositeFieldContainer[GroupProtocol]
    client_software: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[GroupProtocol, _Mapping]]] = ..., client_software: _Optional[str] = ...) -> None: ...

class JoinGroupMember(_message.Message):
    __slots__ = ("member_id", "metadata")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    metadata: bytes
    def __init__(self, member_id: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupResponse(_message.Message):
    __slots__ = ("generation_id", "protocol_name", "leader_id", "member_id", "members")
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    generation_id: int
    protocol_name: str
    leader_id: str
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[JoinGroupMember]
    def __init__(self, generation_id: _Optional[int] = ..., protocol_name: _Optional[str] = ..., leader_id: _Optional[str] = ..., member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[JoinGroupMember, _Mapping]]] = ...) -> None: ...

class MemberAssignment(_message.Message):
    __slots__ = ("member_id", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class SyncGroupRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "assignments")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    assignments: _containers.RepeatedCompositeFieldContainer[MemberAssignment]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., assignments: _Optional[_Iterable[_Union[MemberAssignment, _Mapping]]] = ...) -> None: ...

class SyncGroupResponse(_message.Message):
    __slots__ = ("assignment",)
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    assignment: bytes
    def __init__(self, assignment: _Optional[bytes] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("group_id", "member_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class GroupMemberDescription(_message.Message):
    __slots__ = ("member_id", "client_id", "client_host", "metadata", "assignment", "client_software")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    client_software: str
    def __init__(self, member_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., metadata: _Optional[bytes] = ..., assignment: _Optional[bytes] = ..., client_software: _Optional[str] = ...) -> None: ...

class DescribeGroupResponse(_message.Message):
    __slots__ = ("group_id", "state", "protocol_name", "generation_id", "leader_id", "members", "consume_type", "defined")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEFINED_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    protocol_name: str
    generation_id: int
    leader_id: str
    members: _containers.RepeatedCompositeFieldContainer[GroupMemberDescription]
    consume_type: ConsumeType
    defined: bool
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., protocol_name: _Optional[str] = ..., generation_id: _Optional[int] = ..., leader_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[GroupMemberDescription, _Mapping]]] = ..., consume_type: _Optional[_Union[ConsumeType, str]] = ..., defined: _Optional[bool] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[DescribeGroupResponse]
    def __init__(self, groups: _Optional[_Iterable[_Union[DescribeGroupResponse, _Mapping]]] = ...) -> None: ...

class SubscriptionGroup(_message.Message):
    __slots__ = ("name", "consume_enable", "consume_from_min_enable", "consume_broadcast_enable", "consume_message_orderly", "retry_queue_nums", "retry_max_times", "broker_id", "which_broker_when_consume_slowly", "notify_consumer_ids_changed_enable", "defined")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_ENABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_MIN_ENABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUME_BROADCAST_ENABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUME_MESSAGE_ORDERLY_FIELD_NUMBER: _ClassVar[int]
    RETRY_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    RETRY_MAX_TIMES_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    WHICH_BROKER_WHEN_CONSUME_SLOWLY_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_CONSUMER_IDS_CHANGED_ENABLE_FIELD_NUMBER: _ClassVar[int]
    DEFINED_FIELD_NUMBER: _ClassVar[int]
    name: str
    consume_enable: bool
    consume_from_min_enable: bool
    consume_broadcast_enable: bool
    consume_message_orderly: bool
    retry_queue_nums: int
    retry_max_times: int
    broker_id: int
    which_broker_when_consume_slowly: int
    notify_consumer_ids_changed_enable: bool
    defined: bool
    def __init__(self, name: _Optional[str] = ..., consume_enable: _Optional[bool] = ..., consume_from_min_enable: _Optional[bool] = ..., consume_broadcast_enable: _Optional[bool] = ..., consume_message_orderly: _Optional[bool] = ..., retry_queue_nums: _Optional[int] = ..., retry_max_times: _Optional[int] = ..., broker_id: _Optional[int] = ..., which_broker_when_consume_slowly: _Optional[int] = ..., notify_consumer_ids_changed_enable: _Optional[bool] = ..., defined: _Optional[bool] = ...) -> None: ...

class GetSubscriptionGroupsRequest(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class GetSubscriptionGroupsResponse(_message.Message):
    __slots__ = ("groups", "auto_create", "revision")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    AUTO_CREATE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[SubscriptionGroup]
    auto_create: bool
    revision: int
    def __init__(self, groups: _Optional[_Iterable[_Union[SubscriptionGroup, _Mapping]]] = ..., auto_create: _Optional[bool] = ..., revision: _Optional[int] = ...) -> None: ...

class SendMessageBackRequest(_message.Message):
    __slots__ = ("consumer_group", "physical_offset", "dead_letter", "reconsume_times")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    physical_offset: int
    dead_letter: bool
    reconsume_times: int
    def __init__(self, consumer_group: _Optional[str] = ..., physical_offset: _Optional[int] = ..., dead_letter: _Optional[bool] = ..., reconsume_times: _Optional[int] = ...) -> None: ...

class SendMessageBackResponse(_message.Message):
    __slots__ = ("dead_letter", "topic", "queue_id", "queue_offset", "reconsume_times")
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    dead_letter: bool
    topic: str
    queue_id: int
    queue_offset: int
    reconsume_times: int
    def __init__(self, dead_letter: _Optional[bool] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., reconsume_times: _Optional[int] = ...) -> None: ...

class RedriveDeadLetterRequest(_message.Message):
    __slots__ = ("consumer_group", "physical_offset")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    physical_offset: int
    def __init__(self, consumer_group: _Optional[str] = ..., physical_offset: _Optional[int] = ...) -> None: ...

class RedriveDeadLetterResponse(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class PopRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "max_messages", "invisible_duration_ms", "wait_ms", "tag_expression", "expression_type")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    TAG_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    max_messages: int
    invisible_duration_ms: int
    wait_ms: int
    tag_expression: str
    expression_type: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., max_messages: _Optional[int] = ..., invisible_duration_ms: _Optional[int] = ..., wait_ms: _Optional[int] = ..., tag_expression: _Optional[str] = ..., expression_type: _Optional[str] = ...) -> None: ...

class PopResponse(_message.Message):
    __slots__ = ("records", "record_count", "receipt_handles", "throttle_time_ms")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    records: bytes
    record_count: int
    receipt_handles: _containers.RepeatedScalarFieldContainer[str]
    throttle_time_ms: int
    def __init__(self, records: _Optional[bytes] = ..., record_count: _Optional[int] = ..., receipt_handles: _Optional[_Iterable[str]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("consumer_group", "receipt_handle", "receipt_handles")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    receipt_handle: str
    receipt_handles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, consumer_group: _Optional[str] = ..., receipt_handle: _Optional[str] = ..., receipt_handles: _Optional[_Iterable[str]] = ...) -> None: ...

class AckEntryResult(_message.Message):
    __slots__ = ("receipt_handle", "code", "message")
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    receipt_handle: str
    code: str
    message: str
    def __init__(self, receipt_handle: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AckEntryResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AckEntryResult, _Mapping]]] = ...) -> None: ...

class ChangeInvisibleDurationRequest(_message.Message):
    __slots__ = ("consumer_group", "receipt_handle", "invisible_duration_ms")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    receipt_handle: str
    invisible_duration_ms: int
    def __init__(self, consumer_group: _Optional[str] = ..., receipt_handle: _Optional[str] = ..., invisible_duration_ms: _Optional[int] = ...) -> None: ...

class ChangeInvisibleDurationResponse(_message.Message):
    __slots__ = ("receipt_handle",)
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    receipt_handle: str
    def __init__(self, receipt_handle: _Optional[str] = ...) -> None: ...

class LockedQueue(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class LockQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[LockedQueue]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[LockedQueue, _Mapping]]] = ...) -> None: ...

class LockQueuesResponse(_message.Message):
    __slots__ = ("locked",)
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    locked: _containers.RepeatedCompositeFieldContainer[LockedQueue]
    def __init__(self, locked: _Optional[_Iterable[_Union[LockedQueue, _Mapping]]] = ...) -> None: ...

class UnlockQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[LockedQueue]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[LockedQueue, _Mapping]]] = ...) -> None: ...

class UnlockQueuesResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("producer_group", "transaction_id", "half_offset", "resolution", "from_check")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    HALF_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    FROM_CHECK_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    transaction_id: str
    half_offset: int
    resolution: TransactionResolution
    from_check: bool
    def __init__(self, producer_group: _Optional[str] = ..., transaction_id: _Optional[str] = ..., half_offset: _Optional[int] = ..., resolution: _Optional[_Union[TransactionResolution, str]] = ..., from_check: _Optional[bool] = ...) -> None: ...

class EndTransactionResponse(_message.Message):
    __slots__ = ("state", "already_resolved")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    state: str
    already_resolved: bool
    def __init__(self, state: _Optional[str] = ..., already_resolved: _Optional[bool] = ...) -> None: ...

class ProducerHeartbeatRequest(_message.Message):
    __slots__ = ("producer_group", "client_id")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    client_id: str
    def __init__(self, producer_group: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class ProducerHeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TransactionChecksRequest(_message.Message):
    __slots__ = ("producer_group", "client_id")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    client_id: str
    def __init__(self, producer_group: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class TransactionCheck(_message.Message):
    __slots__ = ("transaction_id", "half_offset", "record", "check_times")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    HALF_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    CHECK_TIMES_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    half_offset: int
    record: bytes
    check_times: int
    def __init__(self, transaction_id: _Optional[str] = ..., half_offset: _Optional[int] = ..., record: _Optional[bytes] = ..., check_times: _Optional[int] = ...) -> None: ...

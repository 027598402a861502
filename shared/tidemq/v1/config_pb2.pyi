from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeyValue(_message.Message):
    __slots__ = ("key", "value", "create_revision", "mod_revision", "version", "lease")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATE_REVISION_FIELD_NUMBER: _ClassVar[int]
    MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., create_revision: _Optional[int] = ..., mod_revision: _Optional[int] = ..., version: _Optional[int] = ..., lease: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("found", "kv", "revision")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    KV_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    kv: KeyValue
    revision: int
    def __init__(self, found: _Optional[bool] = ..., kv: _Optional[_Union[KeyValue, _Mapping]] = ..., revision: _Optional[int] = ...) -> None: ...

class RangeRequest(_message.Message):
    __slots__ = ("prefix", "revision", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    revision: int
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., revision: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class RangeResponse(_message.Message):
    __slots__ = ("kvs", "revision")
    KVS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    kvs: _containers.RepeatedCompositeFieldContainer[KeyValue]
    revision: int
    def __init__(self, kvs: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("key", "value", "expected_mod_revision", "lease")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    expected_mod_revision: int
    lease: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., expected_mod_revision: _Optional[int] = ..., lease: _Optional[int] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("succeeded", "revision", "current_mod_revision", "prev_kv")
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    PREV_KV_FIELD_NUMBER: _ClassVar[int]
    succeeded: bool
    revision: int
    current_mod_revision: int
    prev_kv: KeyValue
    def __init__(self, succeeded: _Optional[bool] = ..., revision: _Optional[int] = ..., current_mod_revision: _Optional[int] = ..., prev_kv: _Optional[_Union[KeyValue, _Mapping]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("key", "expected_mod_revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    expected_mod_revision: int
    def __init__(self, key: _Optional[str] = ..., expected_mod_revision: _Optional[int] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("succeeded", "deleted", "revision", "current_mod_revision")
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    succeeded: bool
    deleted: bool
    revision: int
    current_mod_revision: int
    def __init__(self, succeeded: _Optional[bool] = ..., deleted: _Optional[bool] = ..., revision: _Optional[int] = ..., current_mod_revision: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("prefix", "start_revision")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    START_REVISION_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    start_revision: int
    def __init__(self, prefix: _Optional[str] = ..., start_revision: _Optional[int] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("type", "kv")
    class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PUT: _ClassVar[Event.EventType]
        DELETE: _ClassVar[Event.EventType]
    PUT: Event.EventType
    DELETE: Event.EventType
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KV_FIELD_NUMBER: _ClassVar[int]
    type: Event.EventType
    kv: KeyValue
    def __init__(self, type: _Optional[_Union[Event.EventType, str]] = ..., kv: _Optional[_Union[KeyValue, _Mapping]] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("events", "revision", "compacted", "compact_revision")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    COMPACT_REVISION_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    revision: int
    compacted: bool
    compact_revision: int
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., revision: _Optional[int] = ..., compacted: _Optional[bool] = ..., compact_revision: _Optional[int] = ...) -> None: ...

class LeaseGrantRequest(_message.Message):
    __slots__ = ("ttl_seconds",)
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ttl_seconds: int
    def __init__(self, ttl_seconds: _Optional[int] = ...) -> None: ...

class LeaseGrantResponse(_message.Message):
    __slots__ = ("lease", "ttl_seconds")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    lease: int
    ttl_seconds: int
    def __init__(self, lease: _Optional[int] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class LeaseKeepAliveRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    def __init__(self, lease: _Optional[int] = ...) -> None: ...

class LeaseKeepAliveResponse(_message.Message):
    __slots__ = ("lease", "ttl_seconds")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    lease: int
    ttl_seconds: int
    def __init__(self, lease: _Optional[int] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class LeaseRevokeRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    def __init__(self, lease: _Optional[int] = ...) -> None: ...

class LeaseRevokeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("key", "limit")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: int
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ("key", "to_revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TO_REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    to_revision: int
    def __init__(self, key: _Optional[str] = ..., to_revision: _Optional[int] = ...) -> None: ...

class Compare(_message.Message):
    __slots__ = ("key", "target", "revision")
    class Target(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        MOD: _ClassVar[Compare.Target]
        CREATE: _ClassVar[Compare.Target]
    MOD: Compare.Target
    CREATE: Compare.Target
    KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    target: Compare.Target
    revision: int
    def __init__(self, key: _Optional[str] = ..., target: _Optional[_Union[Compare.Target, str]] = ..., revision: _Optional[int] = ...) -> None: ...

class TxnRequest(_message.Message):
    __slots__ = ("compare", "puts", "deletes")
    COMPARE_FIELD_NUMBER: _ClassVar[int]
    PUTS_FIELD_NUMBER: _ClassVar[int]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    compare: _containers.RepeatedCompositeFieldContainer[Compare]
    puts: _containers.RepeatedCompositeFieldContainer[PutRequest]
    deletes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, compare: _Optional[_Iterable[_Union[Compare, _Mapping]]] = ..., puts: _Optional[_Iterable[_Union[PutRequest, _Mapping]]] = ..., deletes: _Optional[_Iterable[str]] = ...) -> None: ...

class TxnResponse(_message.Message):
    __slots__ = ("succeeded", "revision", "compared")
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    COMPARED_FIELD_NUMBER: _ClassVar[int]
    succeeded: bool
    revision: int
    compared: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, succeeded: _Optional[bool] = ..., revision: _Optional[int] = ..., compared: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class EffectiveConfigRequest(_message.Message):
    __slots__ = ("cluster", "broker_group", "broker")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    BROKER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_group: str
    broker: str
    def __init__(self, cluster: _Optional[str] = ..., broker_group: _Optional[str] = ..., broker: _Optional[str] = ...) -> None: ...

class ConfigSetting(_message.Message):
    __slots__ = ("name", "value", "scope", "source_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    scope: str
    source_key: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., scope: _Optional[str] = ..., source_key: _Optional[str] = ...) -> None: ...

class EffectiveConfigResponse(_message.Message):
    __slots__ = ("settings", "revision")
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    settings: _containers.RepeatedCompositeFieldContainer[ConfigSetting]
    revision: int
    def __init__(self, settings: _Optional[_Iterable[_Union[ConfigSetting, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...

class DescribeStoreRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EtcdMember(_message.Message):
    __slots__ = ("name", "id", "endpoint", "reachable", "error", "leader", "raft_term", "raft_index", "raft_applied_index", "lag_entries", "db_size_bytes", "version", "learner", "alarms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    RAFT_TERM_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    RAFT_APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DB_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    ALARMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    endpoint: str
    reachable: bool
    error: str
    leader: bool
    raft_term: int
    raft_index: int
    raft_applied_index: int
    lag_entries: int
    db_size_bytes: int
    version: str
    learner: bool
    alarms: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., endpoint: _Optional[str] = ..., reachable: _Optional[bool] = ..., error: _Optional[str] = ..., leader: _Optional[bool] = ..., raft_term: _Optional[int] = ..., raft_index: _Optional[int] = ..., raft_applied_index: _Optional[int] = ..., lag_entries: _Optional[int] = ..., db_size_bytes: _Optional[int] = ..., version: _Optional[str] = ..., learner: _Optional[bool] = ..., alarms: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeStoreResponse(_message.Message):
    __slots__ = ("advertised_addr", "version", "target", "members", "cluster_id", "revision", "leader")
    ADVERTISED_ADDR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    advertised_addr: str
    version: str
    target: str
    members: _containers.RepeatedCompositeFieldContainer[EtcdMember]
    cluster_id: str
    revision: int
    leader: str
    def __init__(self, advertised_addr: _Optional[str] = ..., version: _Optional[str] = ..., target: _Optional[str] = ..., members: _Optional[_Iterable[_Union[EtcdMember, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., revision: _Optional[int] = ..., leader: _Optional[str] = ...) -> None: ...

from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SendStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEND_OK: _ClassVar[SendStatus]
    FLUSH_DISK_TIMEOUT: _ClassVar[SendStatus]
    FLUSH_SLAVE_TIMEOUT: _ClassVar[SendStatus]
    SLAVE_NOT_AVAILABLE: _ClassVar[SendStatus]
SEND_OK: SendStatus
FLUSH_DISK_TIMEOUT: SendStatus
FLUSH_SLAVE_TIMEOUT: SendStatus
SLAVE_NOT_AVAILABLE: SendStatus

class TopicConfig(_message.Message):
    __slots__ = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", "order")
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    order: bool
    def __init__(self, topic_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ..., order: _Optional[bool] = ...) -> None: ...

class DataVersion(_message.Message):
    __slots__ = ("timestamp", "counter")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    counter: int
    def __init__(self, timestamp: _Optional[int] = ..., counter: _Optional[int] = ...) -> None: ...

"""The declared request bodies and query parameters of every gateway route (tidemq.gateway.
schema explains the rules). Each model is both the route's validation and its OpenAPI schema;
a field's `ErrorCode` is the code a client gets for any problem with it.

Limits that depend on the gateway's settings (`--max-pull-messages`, `--max-pull-wait-ms`)
are checked by the view with `within_setting`, since a schema is the same for every
deployment.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from tidemq.client.message import MAX_MESSAGE_GROUP_LEN, validate_message_group
from tidemq.common import sqlfilter
from tidemq.common.errors import InvalidArgument
from tidemq.common.receipt import MAX_ACK_BATCH
from tidemq.common.topic_names import (
    MAX_TOPIC_NAME_LEN,
    TOPIC_NAME,
    TOPIC_NAME_ALPHABET,
    validate_topic_name,
)
from tidemq.configclient import groups, topic_settings
from tidemq.gateway.schema import (
    ErrorCode,
    QueryParameters,
    RequestBody,
    domain_check,
    rule_error,
)
from tidemq.gateway.transactions import DEFAULT_PRODUCER_GROUP, check_producer_group

MAX_QUEUES = 1024
MAX_BATCH = 1000
MAX_POP = 32
MAX_INVISIBLE_MS = 12 * 3600 * 1000
DEFAULT_INVISIBLE_MS = 30_000
MAX_OFFSET = 2**63 - 1
MAX_SEARCH = 1000       # messages one look-up answers (as `tidemq message query --max`)
# Far enough for any broker's max_delay_ms (the broker refuses DELAY_TOO_LONG), small enough
# that now + delay fits the record's int64 and a JSON number stays exact in every client.
MAX_DELAY_FIELD_MS = 2**53 - 1

# The client's check gives the sentence (it names the bad characters); the JSON schema says
# the same rule for the document.
TopicName = Annotated[str, Field(json_schema_extra={
    "minLength": 1, "maxLength": MAX_TOPIC_NAME_LEN, "pattern": f"^[{TOPIC_NAME_ALPHABET}]+$"}),
    AfterValidator(domain_check(validate_topic_name))]


# Checked by topic_settings, which names the setting: unknown names, bad values.
TopicSettings = Annotated[dict[str, Any] | None, Field(description=(
    "per-topic settings with Kafka's names, e.g. {\"retention.ms\": 60000, "
    "\"cleanup.policy\": \"compact\"} (docs/topics.md)"),
    json_schema_extra={"anyOf": [topic_settings.json_schema(), {"type": "null"}]}),
    ErrorCode("INVALID_TOPIC_CONFIG"),
    AfterValidator(domain_check(lambda config: topic_settings.parse_json_settings(config or {})))]


def within_setting(value: int, high: int, name: str, setting: str, code: str,
                   query: bool = False) -> int:
    """A request value checked against a limit the gateway's settings choose."""
    if value > high:
        what = f"query parameter {name!r}" if query else name
        raise InvalidArgument(f"{what} must be at most {high} (--{setting.replace('_', '-')}), "
                              f"got {value}", code=code)
    return value


# -- topics and messages -------------------------------------------------------------------

class TopicCreateRequest(RequestBody):
    """POST /v1/topics."""

    name: Annotated[TopicName, ErrorCode("INVALID_TOPIC"),
                    Field(description=f"the topic name, {TOPIC_NAME.pattern}")]
    queues: Annotated[int, Field(ge=1, le=MAX_QUEUES,
                                 description="queues on each broker group"),
                      ErrorCode("INVALID_QUEUE_COUNT")] = 4
    order: Annotated[bool, Field(strict=True, description=(
        "an ordered (FIFO) topic, as `tidemq topic create --order`: orderly consumers "
        "lock its queues and RocketMQ 5 clients treat it as FIFO")),
                     ErrorCode("INVALID_ORDER")] = False
    config: TopicSettings = None


class TopicAlterRequest(RequestBody):
    """PATCH /v1/topics/{topic}."""

    config: Annotated[dict[str, Any], Field(description=(
        "per-topic settings to change, with Kafka's names (docs/topics.md); null puts one "
        "back to its default"), json_schema_extra=topic_settings.json_schema(allow_null=True)),
        ErrorCode("INVALID_TOPIC_CONFIG"),
        AfterValidator(domain_check(
            lambda config: topic_settings.parse_json_settings(config, allow_null=True)))]


class RecallRequest(RequestBody):
    """POST /v1/topics/{topic}/recall."""

    recall_handle: Annotated[str, Field(min_length=1, max_length=4096, description=(
        "what the send of a delayed message answered")), ErrorCode("INVALID_RECALL_HANDLE")]


class TopicDeleteQuery(QueryParameters):
    """DELETE /v1/topics/{topic}."""

    keep_offsets: Annotated[bool, Field(description=(
        "keep the groups' committed offsets of the topic (as `tidemq topic delete "
        "--keep-offsets`; a group's describe then shows them as orphaned)"))] = False


class SendMessage(RequestBody):
    """One message of POST /v1/topics/{topic}/messages."""

    model_config = ConfigDict(json_schema_extra={"not": {"required": ["delay_ms",
                                                                      "deliver_at"]}})
    error_code: ClassVar[str] = "INVALID_MESSAGE"

    body: Annotated[str, Field(description="UTF-8 text, or base64 with encoding base64; "
                                           "non-empty once decoded")]
    encoding: Literal["utf-8", "base64"] = "utf-8"
    key: Annotated[str, Field(description="one key (no spaces), indexed by the broker")] = ""
    keys: Annotated[list[str], Field(description="several keys (no spaces)")] = []
    tag: Annotated[str, Field(description="the message's one tag (consumer-side filter)")] = ""
    tags: Annotated[str, Field(description="the same as tag (RocketMQ's name)")] = ""
    properties: Annotated[dict[Annotated[str, Field(min_length=1)], str],
                          Field(description="user properties, string to string")] = {}
    message_group: Annotated[str, Field(
        description="FIFO: messages of one group go to one queue and keep their send order",
        json_schema_extra={"maxLength": MAX_MESSAGE_GROUP_LEN}),
        AfterValidator(domain_check(validate_message_group))] = ""
    delay_ms: Annotated[int, Field(ge=0, le=MAX_DELAY_FIELD_MS,
                                   description="deliver this long after the gateway received "
                                               "it (not with deliver_at)"),
                        ErrorCode("INVALID_DELAY")] = 0
    deliver_at: Annotated[int, Field(ge=0, le=MAX_DELAY_FIELD_MS,
                                     description="deliver at this time, epoch milliseconds "
                                                 "(a past time: now; not with delay_ms)"),
                          ErrorCode("INVALID_DELAY")] = 0

    @model_validator(mode="after")
    def _one_tag_one_delay(self) -> SendMessage:
        if self.tag and self.tags and self.tag != self.tags:
            raise rule_error("INVALID_MESSAGE", "give tag or tags, not two different tags")
        if {"delay_ms", "deliver_at"} <= self.model_fields_set:
            raise rule_error("INVALID_DELAY", "give delay_ms or deliver_at, not both")
        return self

    def deliver_at_ms(self, now_ms: int) -> int:
        """Message.deliver_at_ms: 0 (deliver now) unless a delay or a due time was given."""
        return now_ms + self.delay_ms if self.delay_ms else self.deliver_at

    @property
    def all_keys(self) -> list[str]:
        return [self.key, *self.keys] if self.key else list(self.keys)


class SendRequest(RequestBody):
    """POST /v1/topics/{topic}/messages."""

    messages: Annotated[list[SendMessage],
                        Field(min_length=1, max_length=MAX_BATCH,
                              description=f"1..{MAX_BATCH} messages, sent in this order"),
                        ErrorCode("INVALID_REQUEST", too_long="BATCH_TOO_LARGE")]
    transaction_id: Annotated[str, Field(
        description="send into this open transaction (POST /v1/transactions): the messages "
                    "stay invisible until it is committed"), ErrorCode("INVALID_REQUEST")] = ""


class SubscriptionFilter(BaseModel):
    """Which messages a read returns: a tag expression or a SQL92 filter (pop bodies and
    queue-read queries share these fields and their rules)."""

    tag: Annotated[str, Field(description='tag expression: "*" or "a || b"'),
                   ErrorCode("INVALID_ARGUMENT")] = "*"
    filter_type: Annotated[Literal["TAG", "SQL92"], Field(
        description='"TAG" (default): `filter` is a tag expression, like `tag`; "SQL92": '
                    '`filter` is a SQL92 filter over the message properties, evaluated by the '
                    'broker (docs/filters.md)'),
        ErrorCode("INVALID_FILTER")] = "TAG"
    filter: Annotated[str, Field(
        max_length=sqlfilter.MAX_EXPRESSION_LENGTH,
        description="the filter of `filter_type`, e.g. \"amount > 5 AND region IN ('eu')\""),
        ErrorCode("INVALID_FILTER")] = ""

    @model_validator(mode="after")
    def _one_filter(self) -> SubscriptionFilter:
        if self.filter_type == sqlfilter.SQL92:
            if "tag" in self.model_fields_set:
                raise rule_error("INVALID_FILTER", 'give "tag" or a SQL92 "filter", not both '
                                 "(a SQL92 filter can test TAGS)")
            try:
                sqlfilter.compile_sql92(self.filter)  # the position of a mistake, as a 400
            except sqlfilter.InvalidFilter as exc:
                raise rule_error("INVALID_FILTER", exc.message) from None
        elif self.filter and "tag" in self.model_fields_set and self.filter != self.tag:
            raise rule_error("INVALID_FILTER", 'give "tag" or "filter", not two tag expressions')
        return self

    @property
    def subscription(self) -> tuple[str, str]:
        """(expression, expression type) as the SDK takes them."""
        if self.filter_type == sqlfilter.SQL92:
            return self.filter, sqlfilter.SQL92
        return self.filter or self.tag, sqlfilter.TAG


class FetchQuery(QueryParameters, SubscriptionFilter):
    """GET /v1/topics/{topic}/queues/{broker_name}/{queue_id}/messages."""

    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="first queue offset")] = 0
    max: Annotated[int, Field(ge=1, description="at most this many messages "
                                                "(up to --max-pull-messages)")] = 32
    wait_ms: Annotated[int, Field(ge=0, description="long poll up to this long "
                                                    "(up to --max-pull-wait-ms)")] = 0


class MessageSearchQuery(QueryParameters):
    """GET /v1/topics/{topic}/messages: by `key`, or every message in a time range."""

    key: Annotated[str, Field(max_length=1024, description="messages carrying this key (the "
                                                           "brokers' key index)")] = ""
    begin_ms: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="stored at or after "
                                                                    "(Unix ms)")] = 0
    end_ms: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="stored before (Unix ms, "
                                                                  "0 = now)")] = 0
    max: Annotated[int, Field(ge=1, le=MAX_SEARCH, description="at most this many")] = 32

    @model_validator(mode="after")
    def _ordered(self) -> MessageSearchQuery:
        if self.end_ms and self.end_ms <= self.begin_ms:
            raise rule_error("INVALID_ARGUMENT", f"end_ms ({self.end_ms}) must be after "
                             f"begin_ms ({self.begin_ms})")
        return self


class OffsetsAtQuery(QueryParameters):
    """GET /v1/topics/{topic}/offsets."""

    timestamp_ms: Annotated[int, Field(ge=0, le=MAX_OFFSET, description=(
        "per queue, the first offset stored at or after this time (Unix ms)"))]


class OffsetResetRequest(RequestBody):
    """POST /v1/consumer-groups/{group}/reset-offsets."""

    topic: Annotated[TopicName, ErrorCode("INVALID_TOPIC"),
                     Field(description="the topic whose committed offsets move")]
    timestamp_ms: Annotated[int, Field(ge=0, le=MAX_OFFSET, description=(
        "to the first message stored at or after this time (Unix ms), backwards or forwards")),
        ErrorCode("INVALID_ARGUMENT")]


# -- pop consumption and dead letters ------------------------------------------------------

class PopRequest(RequestBody, SubscriptionFilter):
    """POST /v1/groups/{group}/topics/{topic}/pop (every field optional, the body too)."""

    max: Annotated[int, Field(ge=1, le=MAX_POP, description="at most this many messages"),
                   ErrorCode("INVALID_ARGUMENT")] = 16
    invisible_ms: Annotated[int, Field(ge=1, le=MAX_INVISIBLE_MS,
                                       description="invisible to the group this long"),
                            ErrorCode("INVALID_INVISIBLE_DURATION")] = DEFAULT_INVISIBLE_MS
    wait_ms: Annotated[int, Field(ge=0, description="long poll (up to --max-pull-wait-ms)"),
                       ErrorCode("INVALID_ARGUMENT")] = 0


ReceiptHandle = Annotated[str, Field(min_length=1, description="from a pop"),
                          ErrorCode("INVALID_RECEIPT_HANDLE")]


class AckRequest(RequestBody):
    """POST .../ack: one `receipt_handle`, or a batch in `receipt_handles` (one call per
    broker group behind it, per-handle results in the answer)."""

    receipt_handle: ReceiptHandle = ""
    receipt_handles: Annotated[list[ReceiptHandle], Field(
        max_length=MAX_ACK_BATCH, description=f"a batch of up to {MAX_ACK_BATCH} handles"),
        ErrorCode("INVALID_RECEIPT_HANDLE", too_long="INVALID_ARGUMENT")] = []

    @model_validator(mode="after")
    def _one_form(self) -> AckRequest:
        if self.receipt_handle and self.receipt_handles:
            raise rule_error("INVALID_ARGUMENT", 'give "receipt_handle" (one string) or '
                             '"receipt_handles" (a list of strings), not both')
        if not self.receipt_handle and not self.receipt_handles:
            raise rule_error("INVALID_RECEIPT_HANDLE", 'receipt_handle is required (or '
                             '"receipt_handles", a non-empty list of strings)')
        return self


class InvisibleRequest(RequestBody):
    """POST .../invisible."""

    receipt_handle: ReceiptHandle
    invisible_ms: Annotated[int, Field(ge=1, le=MAX_INVISIBLE_MS,
                                       description="new invisible time, from now"),
                            ErrorCode("INVALID_INVISIBLE_DURATION")]


class RedriveRequest(RequestBody):
    """POST /v1/groups/{group}/dlq/redrive: `msg_ids` or `"all": true`."""

    model_config = ConfigDict(**RequestBody.model_config, json_schema_extra={"anyOf": [
        {"required": ["msg_ids"],
         "properties": {"msg_ids": {"minItems": 1}, "all": {"const": False}}},
        {"required": ["all"],
         "properties": {"all": {"const": True}, "msg_ids": {"maxItems": 0}}}]})
    msg_ids: Annotated[list[str], Field(description="dead letters to re-drive (non-empty "
                                                    "unless all)")] = []
    all: Annotated[bool, Field(description="re-drive every listed dead letter")] = False

    @model_validator(mode="after")
    def _one_choice(self) -> RedriveRequest:
        if self.all == bool(self.msg_ids):
            raise rule_error("INVALID_REQUEST",
                             'give "msg_ids" (a non-empty list of strings) or "all": true')
        return self


class DeadLetterQuery(QueryParameters):
    """GET /v1/groups/{group}/dlq."""

    limit: Annotated[int, Field(ge=1, le=1000, description="at most this many")] = 100


# -- transactions (tidemq.gateway.transactions) --------------------------------------------

class TransactionOpenRequest(RequestBody):
    """POST /v1/transactions (the body is optional)."""

    producer_group: Annotated[str, Field(
        description="the producer group whose TransactionProducer prepares the messages and "
                    "answers the brokers' check-backs",
        json_schema_extra={"minLength": 1, "maxLength": MAX_TOPIC_NAME_LEN,
                           "pattern": f"^[{TOPIC_NAME_ALPHABET}]+$"}),
        AfterValidator(domain_check(check_producer_group)),
        ErrorCode("INVALID_PRODUCER_GROUP")] = DEFAULT_PRODUCER_GROUP


class TransactionEndRequest(RequestBody):
    """POST /v1/transactions/{id}/commit and /rollback: no fields (the body is optional)."""


# -- subscription groups (fields from tidemq.configclient.groups, the brokers' schema) ------

def _group_field(name: str) -> tuple[Any, Any]:
    kind, bounds, legal = groups.FIELD_RULES[name]
    extra = {"minimum": bounds[0], "maximum": bounds[1]} if bounds else {}
    default = groups.SubscriptionGroupConfig.__dataclass_fields__[name].default
    annotation = Annotated[kind, Field(description=legal, json_schema_extra=extra or None),
                           ErrorCode("INVALID_SUBSCRIPTION_GROUP")]
    return annotation, default


class _GroupBody(RequestBody):
    # Ranges are checked by configclient.groups (one sentence naming the legal values).
    error_code: ClassVar[str] = "INVALID_SUBSCRIPTION_GROUP"


_GROUP_NAME = Annotated[str, Field(json_schema_extra={
    "minLength": 1, "maxLength": groups.MAX_GROUP_NAME_LEN,
    "pattern": f"^[{groups.GROUP_NAME_ALPHABET}]+$"}), ErrorCode("INVALID_SUBSCRIPTION_GROUP")]
_PATCH_GROUP_NAME = Annotated[str, Field(json_schema_extra={  # "" = the path's group
    "maxLength": groups.MAX_GROUP_NAME_LEN, "pattern": f"^[{groups.GROUP_NAME_ALPHABET}]*$"}),
    ErrorCode("INVALID_SUBSCRIPTION_GROUP")]
GroupCreateRequest = create_model(
    "GroupCreateRequest", __base__=_GroupBody, __doc__="POST /v1/groups (unset fields: "
    "defaults).", name=(_GROUP_NAME, ...),
    **{name: _group_field(name) for name in groups.FIELD_RULES})
GroupPatchRequest = create_model(
    "GroupPatchRequest", __base__=_GroupBody, __doc__="PATCH /v1/groups/{name}: the fields "
    "to change.", name=(_PATCH_GROUP_NAME, ""),
    **{name: _group_field(name) for name in groups.FIELD_RULES})


# -- config center -------------------------------------------------------------------------

class ConfigReadQuery(QueryParameters):
    """GET /v1/config/{key}."""

    revision: Annotated[int, Field(ge=0, description="read as of this retained revision "
                                                     "(0 = now)")] = 0
    prefix: Annotated[bool, Field(description="list every key under the path")] = False
    history: Annotated[bool, Field(description="the key's retained changes (puts and "
                                               "deletes), oldest first")] = False
    limit: Annotated[int, Field(ge=0, le=1000, description="with history: the newest this "
                                                           "many changes (0 = every one)")] = 0

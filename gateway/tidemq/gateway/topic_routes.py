"""HTTP face of topics and messages: thin views (parse → one backend call → JSON).

  POST /v1/topics                                create {"name", "queues", "config"?}
  GET  /v1/topics                                list
  GET  /v1/topics/<topic>                        route + per-queue min/max offsets + config
  PATCH /v1/topics/<topic>                       change settings {"config": {name: value}}
  DELETE /v1/topics/<topic>                      delete the definition (404 TOPIC_NOT_EXIST)
  POST /v1/topics/<topic>/messages               send {"messages": [...], "transaction_id"?}
  GET  /v1/topics/<topic>/queues/<broker>/<queue_id>/messages?offset=&max=&wait_ms=&tag=
       (or &filter_type=SQL92&filter=...)
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from tidemq.common import errors
from tidemq.common.recall import RecallHandle
from tidemq.common.topic_names import validate_topic_name
from tidemq.configclient import topic_settings
from tidemq.gateway import metrics
from tidemq.gateway.bodies import (
    FetchQuery,
    RecallRequest,
    SendRequest,
    TopicAlterRequest,
    TopicCreateRequest,
    TopicDeleteQuery,
    within_setting,
)
from tidemq.gateway.messages import message_json, parse_messages
from tidemq.gateway.schema import accepts_body, accepts_query
from tidemq.gateway.settings import GatewaySettings

topics_bp = Blueprint("tidemq_topics", __name__)
BACKEND = "tidemq_backend"
SETTINGS = "tidemq_settings"


def _backend():
    return current_app.extensions[BACKEND]


def _settings() -> GatewaySettings:
    return current_app.extensions[SETTINGS]


@topics_bp.post("/v1/topics")
@accepts_body(TopicCreateRequest)
def create_topic(body: TopicCreateRequest):
    """Create a topic (a definition in the config center; brokers create its queues)."""
    name, queues = body.name, body.queues
    config = topic_settings.parse_settings(body.config or {})
    created = _backend().create_topic(name, queues, order=body.order, config=config)
    body = {"name": name, "queues": queues, "order": body.order, "brokers": created.brokers,
            "config": topic_settings.effective(config)}
    if created.visible:
        return jsonify(body), 201, {"Location": f"/v1/topics/{name}"}
    body["note"] = ("the topic is defined in the config center but its route is not yet "
                    "visible on every broker group; sends may fail with TOPIC_NOT_EXIST "
                    "until brokers have published it")
    return jsonify(body), 202, {"Location": f"/v1/topics/{name}"}


@topics_bp.get("/v1/topics")
def list_topics():
    return jsonify({"topics": _backend().list_topics()})


@topics_bp.get("/v1/topics/<topic>")
def describe_topic(topic: str):
    validate_topic_name(topic)
    return jsonify(_backend().describe_topic(topic))


@topics_bp.patch("/v1/topics/<topic>")
@accepts_body(TopicAlterRequest)
def alter_topic(topic: str, body: TopicAlterRequest):
    """Change per-topic settings live, as `tidemq topic alter` (null: back to the default);
    answers every setting's effective value and source."""
    validate_topic_name(topic)
    return jsonify({"name": topic, "config": _backend().alter_topic(topic, body.config)})


@topics_bp.delete("/v1/topics/<topic>")
@accepts_query(TopicDeleteQuery)
def delete_topic(topic: str, query: TopicDeleteQuery):
    """As `tidemq topic delete`: the definition goes, brokers stop serving it and delete its
    messages, and every group's committed offsets of it are dropped unless keep_offsets."""
    validate_topic_name(topic)
    dropped = _backend().delete_topic(topic, keep_offsets=query.keep_offsets)
    return jsonify({"name": topic, "deleted": True, "offsets_dropped_for": dropped})


@topics_bp.post("/v1/topics/<topic>/messages")
@accepts_body(SendRequest)
def send_messages(topic: str, body: SendRequest):
    """Send messages (one all-or-nothing batch per chosen queue)."""
    messages = parse_messages(topic, body)
    results = (_backend().transactions.send(body.transaction_id, messages) if body.transaction_id
               else _backend().send(messages))
    metrics.MESSAGES_SENT.inc(len(results))
    return jsonify({"results": [{
        "status": r.status.name, "msg_id": r.msg_id, "unique_id": r.unique_id,
        "broker_name": r.broker_name, "queue_id": r.queue_id, "queue_offset": r.queue_offset,
        **({"recall_handle": r.recall_handle(topic)}
           if m.scheduled else {}),
    } for m, r in zip(messages, results, strict=True)]}), 201


@topics_bp.post("/v1/topics/<topic>/recall")
@accepts_body(RecallRequest)
def recall_message(topic: str, body: RecallRequest):
    """Take back a delayed message before it is delivered, by the recall_handle its send
    answered (412 MESSAGE_ALREADY_DELIVERED once due, 404 MESSAGE_NOT_FOUND)."""
    validate_topic_name(topic)
    handle = RecallHandle.decode(body.recall_handle, topic=topic)
    delivery_ms = _backend().producer.recall(body.recall_handle)
    return jsonify({"unique_id": handle.unique_id, "delivery_ms": delivery_ms})


@topics_bp.get("/v1/topics/<topic>/queues/<broker_name>/<int(signed=True):queue_id>/messages")
@accepts_query(FetchQuery)
def fetch_messages(topic: str, broker_name: str, queue_id: int, query: FetchQuery):
    """Read a queue from an offset (long poll with wait_ms)."""
    settings = _settings()
    validate_topic_name(topic)
    offset = query.offset
    max_messages = within_setting(query.max, settings.max_pull_messages, "max",
                                  "max_pull_messages", "INVALID_ARGUMENT", query=True)
    wait_ms = within_setting(query.wait_ms, settings.max_pull_wait_ms, "wait_ms",
                             "max_pull_wait_ms", "INVALID_ARGUMENT", query=True)
    if queue_id < 0:
        raise errors.InvalidArgument(f"queue id must be >= 0, got {queue_id}")
    expression, expression_type = query.subscription
    result = _backend().pull(topic, broker_name, queue_id, offset, max_messages, wait_ms,
                             expression, expression_type)
    metrics.MESSAGES_FETCHED.inc(len(result.messages))
    return jsonify({
        "status": result.status.name,
        "messages": [message_json(m) for m in result.messages],
        "next_offset": result.next_offset,
        "min_offset": result.min_offset,
        "max_offset": result.max_offset,
    })

"""HTTP face of group consumption: pop / ack / invisible with receipt handles, and the group's
dead-letter queue (docs/consumption.md). Thin views: parse → one backend call → JSON.

  POST /v1/groups/<group>/topics/<topic>/pop         {"max", "invisible_ms", "wait_ms", "tag",
                                                      "filter_type", "filter"}
  POST /v1/groups/<group>/topics/<topic>/ack         {"receipt_handle"} or {"receipt_handles"}
  POST /v1/groups/<group>/topics/<topic>/invisible   {"receipt_handle", "invisible_ms"}
  GET  /v1/groups/<group>/dlq?limit=
  POST /v1/groups/<group>/dlq/redrive                {"msg_ids": [...]} or {"all": true}

Request bodies and query parameters are declared in bodies.py (validation and OpenAPI); the
YAML after `---` in each view's docstring adds its responses (openapi.py).
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from tidemq.common.errors import InvalidArgument
from tidemq.common.topic_names import validate_topic_name
from tidemq.configclient.groups import GroupDefinitionError, validate_group_name
from tidemq.gateway.bodies import (
    AckRequest,
    DeadLetterQuery,
    InvisibleRequest,
    PopRequest,
    RedriveRequest,
    within_setting,
)
from tidemq.gateway.messages import message_json, popped_json, received_json
from tidemq.gateway.schema import accepts_body, accepts_query
from tidemq.gateway.topic_routes import _backend, _settings

consume_bp = Blueprint("tidemq_consume", __name__)


def _group(name: str) -> str:
    try:
        validate_group_name(name)
    except GroupDefinitionError as exc:
        raise InvalidArgument(str(exc), code="INVALID_GROUP") from None
    return name


@consume_bp.post("/v1/groups/<group>/topics/<topic>/pop")
@accepts_body(PopRequest, required=False)
def pop(group: str, topic: str, body: PopRequest):
    """Pop messages for a consumer group; each stays invisible to the group until acked or
    until its invisible time passes (then it is delivered again, delivery_count + 1).
    ---
    post:
      summary: Pop messages with receipt handles
      responses:
        "200":
          description: the popped messages (possibly none)
          content:
            application/json:
              schema: PopResponse
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
        "429":
          description: LONG_POLLS_EXHAUSTED, with Retry-After; nothing was popped
          content:
            application/problem+json:
              schema: Problem
    """
    validate_topic_name(topic)
    wait_ms = within_setting(body.wait_ms, _settings().max_pull_wait_ms, "wait_ms",
                             "max_pull_wait_ms", "INVALID_ARGUMENT")
    expression, expression_type = body.subscription
    popped = _backend().pop(_group(group), topic, body.max, body.invisible_ms, wait_ms,
                            expression, expression_type)
    written = popped_json(popped)   # straight from the reply's records, where it can be
    return current_app.json.written(
        None if written is None else b'{"messages":' + written + b"}",
        lambda: {"messages": [received_json(r.message, r.receipt_handle) for r in popped]})


@consume_bp.post("/v1/groups/<group>/topics/<topic>/ack")
@accepts_body(AckRequest)
def ack(group: str, topic: str, body: AckRequest):
    """Acknowledge popped messages: they are not delivered to the group again. One handle
    answers {"acked": true} or an error; a batch answers 200 with one result per handle (a
    bad handle fails alone).
    ---
    post:
      summary: Acknowledge popped messages by their receipt handles
      responses:
        "200":
          description: acked (acking twice is a no-op); for a batch, each handle's result
          content:
            application/json:
              schema: AckResponse
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
        "412": {$ref: "#/components/responses/Problem"}
    """
    validate_topic_name(topic)
    if body.receipt_handle:
        _backend().ack(_group(group), topic, body.receipt_handle)
        return jsonify({"acked": True})
    results = _backend().ack_many(_group(group), topic, list(body.receipt_handles))
    return jsonify({"results": [{"receipt_handle": r.receipt_handle, "acked": r.ok,
                                 "code": r.error.code if r.error else "",
                                 "detail": r.error.message if r.error else ""}
                                for r in results]})


@consume_bp.post("/v1/groups/<group>/topics/<topic>/invisible")
@accepts_body(InvisibleRequest)
def change_invisible(group: str, topic: str, body: InvisibleRequest):
    """Change a popped message's invisible time (from now); answers its new receipt handle.
    ---
    post:
      summary: Change the invisible time of a popped message
      responses:
        "200":
          description: the new receipt handle (the old one is dead)
          content:
            application/json:
              schema: NewReceiptHandle
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
        "412": {$ref: "#/components/responses/Problem"}
    """
    validate_topic_name(topic)
    new = _backend().change_invisible(_group(group), topic, body.receipt_handle,
                                      body.invisible_ms)
    return jsonify({"receipt_handle": new})


@consume_bp.get("/v1/groups/<group>/dlq")
@accepts_query(DeadLetterQuery)
def list_dead_letters(group: str, query: DeadLetterQuery):
    """The group's dead letters not yet re-driven with "all".
    ---
    get:
      summary: List a group's dead-letter queue
      responses:
        "200":
          description: dead letters, oldest first per queue
          content:
            application/json:
              schema: DeadLetters
        "400": {$ref: "#/components/responses/Problem"}
    """
    letters = _backend().dead_letters(_group(group), query.limit)
    return jsonify({"messages": [{
        **message_json(m), "broker_name": m.broker_name,
        "origin_topic": m.origin_topic,
        "origin_msg_id": m.properties.get("ORIGIN_MESSAGE_ID", ""),
        "first_failure_ms": int(m.properties.get("FIRST_FAILURE_MS", 0) or 0),
    } for m in letters]})


@consume_bp.post("/v1/groups/<group>/dlq/redrive")
@accepts_body(RedriveRequest)
def redrive(group: str, body: RedriveRequest):
    """Send dead letters back to their original topic (reconsume count 0).
    ---
    post:
      summary: Re-drive dead letters to their original topic
      responses:
        "200":
          description: where each went
          content:
            application/json:
              schema: RedriveResponse
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    done = _backend().redrive(_group(group), None if body.all else list(body.msg_ids))
    return jsonify({"redriven": [{"msg_id": r.msg_id, "topic": r.topic,
                                  "broker_name": r.broker_name, "queue_id": r.queue_id,
                                  "queue_offset": r.queue_offset} for r in done]})

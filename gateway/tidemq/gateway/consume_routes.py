"""HTTP face of group consumption: pop / ack / invisible with receipt handles, and the group's
dead-letter queue (docs/consumption.md). Thin views: parse → one backend call → JSON.

  POST /v1/groups/<group>/topics/<topic>/pop         {"max", "invisible_ms", "wait_ms", "tag"}
  POST /v1/groups/<group>/topics/<topic>/ack         {"receipt_handle"}
  POST /v1/groups/<group>/topics/<topic>/invisible   {"receipt_handle", "invisible_ms"}
  GET  /v1/groups/<group>/dlq?limit=
  POST /v1/groups/<group>/dlq/redrive                {"msg_ids": [...]} or {"all": true}

The YAML after `---` in each view's docstring is its OpenAPI operation (openapi.py).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from tidemq.common.errors import InvalidArgument
from tidemq.configclient.groups import GroupDefinitionError, validate_group_name
from tidemq.gateway import validation
from tidemq.gateway.topic_routes import _backend, _settings

consume_bp = Blueprint("tidemq_consume", __name__)
MAX_POP = 32
MAX_INVISIBLE_MS = 12 * 3600 * 1000
DEFAULT_INVISIBLE_MS = 30_000


def _group(name: str) -> str:
    try:
        validate_group_name(name)
    except GroupDefinitionError as exc:
        raise InvalidArgument(str(exc), code="INVALID_GROUP") from None
    return name


def _body() -> dict[str, Any]:
    document = validation.parse_json(request.get_data())
    if not isinstance(document, dict):
        raise InvalidArgument("the request body must be a JSON object", code="INVALID_REQUEST")
    return document


def _int(body: dict, name: str, default: int, low: int, high: int, code: str) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f'"{name}" must be an integer {low}..{high}, got {value!r}',
                              code=code)
    return value


def _handle(body: dict) -> str:
    handle = body.get("receipt_handle")
    if not isinstance(handle, str) or not handle:
        raise InvalidArgument('"receipt_handle" (a string from a pop) is required',
                              code="INVALID_RECEIPT_HANDLE")
    return handle


def _received_json(received) -> dict[str, Any]:
    message = received.message
    return {**validation.message_json(message), "topic": message.origin_topic,
            "broker_name": message.broker_name, "receipt_handle": received.receipt_handle,
            "delivery_count": received.delivery_count}


@consume_bp.post("/v1/groups/<group>/topics/<topic>/pop")
def pop(group: str, topic: str):
    """Pop messages for a consumer group; each stays invisible to the group until acked or
    until its invisible time passes (then it is delivered again, delivery_count + 1).
    ---
    post:
      summary: Pop messages with receipt handles
      requestBody:
        required: false
        content:
          application/json:
            schema: PopRequest
      responses:
        "200":
          description: the popped messages (possibly none)
          content:
            application/json:
              schema: PopResponse
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    validation.validate_topic_name(topic)
    raw = request.get_data()
    body = _body() if raw.strip() else {}
    max_messages = _int(body, "max", 16, 1, MAX_POP, "INVALID_ARGUMENT")
    invisible_ms = _int(body, "invisible_ms", DEFAULT_INVISIBLE_MS, 1, MAX_INVISIBLE_MS,
                        "INVALID_INVISIBLE_DURATION")
    wait_ms = _int(body, "wait_ms", 0, 0, _settings().max_pull_wait_ms, "INVALID_ARGUMENT")
    tag = body.get("tag", "*")
    if not isinstance(tag, str):
        raise InvalidArgument('"tag" must be a tag expression string ("*", "a || b")',
                              code="INVALID_ARGUMENT")
    popped = _backend().pop(_group(group), topic, max_messages, invisible_ms, wait_ms, tag)
    return jsonify({"messages": [_received_json(r) for r in popped]})


@consume_bp.post("/v1/groups/<group>/topics/<topic>/ack")
def ack(group: str, topic: str):
    """Acknowledge a popped message: it is not delivered to the group again.
    ---
    post:
      summary: Acknowledge a popped message by its receipt handle
      requestBody:
        required: true
        content:
          application/json:
            schema: ReceiptHandleRequest
      responses:
        "200": {description: acked (acking twice is a no-op)}
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
        "412": {$ref: "#/components/responses/Problem"}
    """
    validation.validate_topic_name(topic)
    _backend().ack(_group(group), topic, _handle(_body()))
    return jsonify({"acked": True})


@consume_bp.post("/v1/groups/<group>/topics/<topic>/invisible")
def change_invisible(group: str, topic: str):
    """Change a popped message's invisible time (from now); answers its new receipt handle.
    ---
    post:
      summary: Change the invisible time of a popped message
      requestBody:
        required: true
        content:
          application/json:
            schema: InvisibleRequest
      responses:
        "200":
          description: the new receipt handle (the old one is dead)
          content:
            application/json:
              schema: ReceiptHandleRequest
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
        "412": {$ref: "#/components/responses/Problem"}
    """
    validation.validate_topic_name(topic)
    body = _body()
    handle = _handle(body)
    if "invisible_ms" not in body:
        raise InvalidArgument('"invisible_ms" is required', code="INVALID_INVISIBLE_DURATION")
    invisible_ms = _int(body, "invisible_ms", 0, 1, MAX_INVISIBLE_MS,
                        "INVALID_INVISIBLE_DURATION")
    new = _backend().change_invisible(_group(group), topic, handle, invisible_ms)
    return jsonify({"receipt_handle": new})


@consume_bp.get("/v1/groups/<group>/dlq")
def list_dead_letters(group: str):
    """The group's dead letters not yet re-driven with "all".
    ---
    get:
      summary: List a group's dead-letter queue
      parameters:
        - {in: query, name: limit, schema: {type: integer, minimum: 1, maximum: 1000}}
      responses:
        "200":
          description: dead letters, oldest first per queue
          content:
            application/json:
              schema: DeadLetters
        "400": {$ref: "#/components/responses/Problem"}
    """
    limit = validation.parse_int(request.args, "limit", 100, 1, 1000)
    letters = _backend().dead_letters(_group(group), limit)
    return jsonify({"messages": [{
        **validation.message_json(m), "broker_name": m.broker_name,
        "origin_topic": m.origin_topic,
        "origin_msg_id": m.properties.get("ORIGIN_MESSAGE_ID", ""),
        "first_failure_ms": int(m.properties.get("FIRST_FAILURE_MS", 0) or 0),
    } for m in letters]})


@consume_bp.post("/v1/groups/<group>/dlq/redrive")
def redrive(group: str):
    """Send dead letters back to their original topic (reconsume count 0).
    ---
    post:
      summary: Re-drive dead letters to their original topic
      requestBody:
        required: true
        content:
          application/json:
            schema: RedriveRequest
      responses:
        "200":
          description: where each went
          content:
            application/json:
              schema: RedriveResponse
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    body = _body()
    msg_ids, every = body.get("msg_ids"), body.get("all", False)
    if every is True and msg_ids is None:
        chosen = None
    elif isinstance(msg_ids, list) and msg_ids and all(isinstance(i, str) for i in msg_ids) \
            and not every:
        chosen = msg_ids
    else:
        raise InvalidArgument('give "msg_ids" (a non-empty list of strings) or "all": true',
                              code="INVALID_REQUEST")
    done = _backend().redrive(_group(group), chosen)
    return jsonify({"redriven": [{"msg_id": r.msg_id, "topic": r.topic, "queue_id": r.queue_id,
                                  "queue_offset": r.queue_offset} for r in done]})

"""`GET /openapi.json`: the OpenAPI 3.1 document of every route, built from the app itself.

Paths and methods come from Flask's URL map (so a new route is described the moment it is
mounted), path parameters from its converters, request bodies and query parameters from the
schema models the view declares (`@accepts_body` / `@accepts_query`, the same models that
validate the request: tidemq.gateway.bodies), and the rest of an operation (its responses)
from the YAML after `---` in the view's docstring (apispec's convention); a view without YAML
still gets its summary from the docstring's first line and the shared problem+json error
response. OpenAPI 3.1 because its schemas are JSON Schema 2020-12, what pydantic generates.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.yaml_utils import load_operations_from_docstring
from apispec_webframeworks.flask import FlaskPlugin
from flask import Blueprint, Flask, current_app, jsonify
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from tidemq.common.kv import KEY_CONTROL_CHARACTERS, MAX_KEY_BYTES
from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN, TOPIC_NAME_ALPHABET
from tidemq.configclient import groups
from tidemq.gateway import auth, topic_routes
from tidemq.gateway.schema import BODY_ATTR, BODY_REQUIRED_ATTR, QUERY_ATTR

openapi_bp = Blueprint("tidemq_openapi", __name__)
SKIPPED_METHODS = {"HEAD", "OPTIONS"}
# HTML pages over this API, not part of it (tidemq.gateway.console)
SKIPPED_BLUEPRINTS = {"tidemq_console"}
# Routes that only explain a mistake (every request to them is a 400), not operations: a
# client never means to call them, and a document listing them promises an answer they never
# give (schemathesis' positive_data_acceptance: `GET /v1/config/`, the empty key).
SKIPPED_ENDPOINTS = {"tidemq_config.empty_key"}
CONVERTER_TYPES = {"IntegerConverter": "integer", "SignedIntegerConverter": "integer"}

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
# how a group consumes (tidemq.broker.group_listing): joined the coordinator, pop/ack, or
# committed offsets without joining
CONSUME_TYPE = {"type": "string", "enum": ["push", "pop", "pull"]}


def _array(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


def _obj(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


# The operator's routes (admin_routes.py)
OPERATOR_SCHEMAS: dict[str, dict[str, Any]] = {
    "Cluster": _obj(
        brokers=_array(_obj(
            cluster=_STR, broker_name=_STR, id=_INT, broker_id=_INT, addr=_STR,
            last_update_ms=_INT,
            role={"type": "string", "enum": ["MASTER", "SLAVE"]}, replica_id=_INT, epoch=_INT,
            in_sync={"type": ["boolean", "null"]}, lag_bytes={"type": ["integer", "null"]},
            lag_s={"type": ["number", "null"]})),
        replication=_obj(
            controller_addr=_STR,
            groups=_array(_obj(broker_name=_STR, master=_INT, epoch=_INT, in_sync=_array(_INT),
                               master_addr=_STR)),
            live_replicas=_array(_obj(broker_name=_STR, replica_id=_INT, addr=_STR,
                                      epoch=_INT, log_end=_INT)))),
    "ControlPlane": _obj(
        config_centers=_array(_obj(address=_STR, reachable=_BOOL, error=_STR, version=_STR,
                                   advertised_addr=_STR, target=_STR)),
        store=_obj(
            reported_by=_STR, target=_STR, cluster_id=_STR, revision=_INT,
            leader=_STR, quorum=_INT,
            members=_array(_obj(name=_STR, id=_STR, endpoint=_STR, reachable=_BOOL,
                                error=_STR, leader=_BOOL, raft_term=_INT, raft_index=_INT,
                                raft_applied_index=_INT,
                                lag_entries={"type": ["integer", "null"]},
                                db_size_bytes=_INT, version=_STR, learner=_BOOL,
                                alarms=_array(_STR))))),
    "Consumed": {**_obj(
        consumed={"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}},
        unanswered=_array(_STR)), "required": ["consumed", "unanswered"]},
    "Throttled": {**_obj(
        throttled=_array(_obj(broker_name=_STR, broker_addr=_STR, quota=_STR, entity=_STR,
                              owed_ms={"type": "integer", "minimum": 0})),
        unanswered=_array(_STR)), "required": ["throttled", "unanswered"]},
    "ConsumerGroups": _obj(groups=_array(_obj(
        group_id=_STR, state=_STR, protocol_name=_STR, generation_id=_INT, members=_INT,
        coordinator=_STR, consume_type=CONSUME_TYPE, defined=_BOOL))),
    "GroupList": _obj(
        groups=_array({**_obj(name=_STR, revision=_INT, defined={"const": True},
                              consume_type={"type": ["string", "null"],
                                            "enum": [*CONSUME_TYPE["enum"], None]}),
                       "required": ["name", "revision", "defined", "consume_type"]}),
        undefined=_array({**_obj(name=_STR, defined={"const": False},
                                 consume_type=CONSUME_TYPE),
                          "required": ["name", "defined", "consume_type"]}),
        invalid=_array(_obj(name=_STR, detail=_STR)),
        consumption_known=_BOOL),
    "ConsumerGroup": _obj(
        group=_STR, coordinator=_STR, state=_STR, protocol=_STR, generation=_INT, leader=_STR,
        members=_array(_obj(member_id=_STR, client_id=_STR, client_host=_STR,
                            topics=_array(_STR), queues=_array(_STR), client_software=_STR,
                            kafka_assignment={"oneOf": [{"type": "null"}, _obj(
                                version=_INT,
                                partitions={"type": "object",
                                            "additionalProperties": _array(_INT)},
                                user_data_len={"type": ["integer", "null"]})]})),
        offsets=_array(_obj(topic=_STR, broker_name=_STR, queue_id=_INT,
                            committed={"type": ["integer", "null"]},
                            max_offset={"type": ["integer", "null"]}, member_id=_STR,
                            unacked={"type": ["integer", "null"]},
                            lag={"type": ["integer", "null"]}, orphaned=_BOOL)),
        total_lag=_INT),
    "OffsetReset": _obj(group=_STR, topic=_STR, timestamp_ms=_INT, offsets=_array(_obj(
        topic=_STR, broker_name=_STR, queue_id=_INT, offset=_INT))),
    "OffsetsAt": _obj(topic=_STR, timestamp_ms=_INT, offsets=_array(_obj(
        broker_name=_STR, queue_id=_INT, offset=_INT))),
    "LocatedMessage": {"allOf": [_ref("Message"), _obj(
        topic=_STR, broker_name=_STR, queue_id=_INT, trace_context=_STR, trace_id=_STR)]},
    "FoundMessages": _obj(messages=_array(_ref("LocatedMessage"))),
}
MESSAGE = {"type": "object", "properties": {
    "body": _STR, "encoding": {"type": "string", "enum": ["utf-8", "base64"]}, "tag": _STR,
    "keys": {"type": "array", "items": _STR}, "properties": {"type": "object"},
    "queue_offset": _INT, "msg_id": _STR, "unique_id": _STR, "born_timestamp": _INT,
    "store_timestamp": _INT, "reconsume_times": _INT, "message_group": _STR}}
SCHEMAS: dict[str, dict[str, Any]] = {
    "Problem": {"type": "object", "required": ["type", "title", "status", "code", "detail"],
                "properties": {"type": _STR, "title": _STR, "status": _INT, "code": _STR,
                               "detail": _STR}},
    "Message": MESSAGE,
    "PoppedMessage": {"allOf": [{"$ref": "#/components/schemas/Message"}, {
        "type": "object", "properties": {"topic": _STR, "broker_name": _STR,
                                         "receipt_handle": _STR, "delivery_count": _INT}}]},
    "AckResponse": {"type": "object", "properties": {
        "acked": _BOOL, "results": {"type": "array", "items": {"type": "object", "properties": {
            "receipt_handle": _STR, "acked": _BOOL, "code": _STR, "detail": _STR}}}}},
    "NewReceiptHandle": {"type": "object", "properties": {"receipt_handle": _STR}},
    "PopResponse": {"type": "object", "properties": {"messages": {
        "type": "array", "items": {"$ref": "#/components/schemas/PoppedMessage"}}}},
    "DeadLetters": {"type": "object", "properties": {"messages": {"type": "array", "items": {
        "allOf": [{"$ref": "#/components/schemas/Message"}, {"type": "object", "properties": {
            "broker_name": _STR, "origin_topic": _STR, "origin_msg_id": _STR,
            "first_failure_ms": _INT}}]}}}},
    "RedriveResponse": {"type": "object", "properties": {"redriven": {"type": "array", "items": {
        "type": "object", "properties": {"msg_id": _STR, "topic": _STR, "broker_name": _STR,
                                         "queue_id": _INT, "queue_offset": _INT}}}}},
}


REF_TEMPLATE = "#/components/schemas/{model}"


# What the server checks a path parameter against, from the same definitions it checks with
# (a name the routes take by this name is always validated by that rule).
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "topic": {"type": "string", "minLength": 1, "maxLength": MAX_TOPIC_NAME_LEN,
              "pattern": f"^[{TOPIC_NAME_ALPHABET}]+$"},
    "group": {"type": "string", "minLength": 1, "maxLength": groups.MAX_GROUP_NAME_LEN,
              "pattern": f"^[{groups.GROUP_NAME_ALPHABET}]+$"},
    "msg_id": {"type": "string", "pattern": "^[0-9A-Fa-f]{32}$"},  # record.parse_offset_msg_id
    "queue_id": {"type": "integer", "minimum": 0},
    "key": {"type": "string", "minLength": 1, "pattern": f"^[^{KEY_CONTROL_CHARACTERS}]+$",
            "description": f"a config-center key: at most {MAX_KEY_BYTES} bytes of UTF-8, "
                           "no control character"},
}
PATH_PARAMETERS["name"] = PATH_PARAMETERS["group"]  # /v1/groups/{name}: a group's name


def _parameters(rule) -> list[dict[str, Any]]:
    return [{"in": "path", "name": name, "required": True,
             "schema": dict(PATH_PARAMETERS.get(name) or {
                 "type": CONVERTER_TYPES.get(type(converter).__name__, "string")})}
            for name, converter in rule._converters.items()]


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF_TEMPLATE)
    required = set(schema.get("required", ()))
    return [{"in": "query", "name": name, "required": name in required,
             "description": prop.pop("description", ""), "schema": prop}
            for name, prop in schema["properties"].items()]


def _declared(view, operation: dict[str, Any], models: set[type[BaseModel]]) -> None:
    """The request body and query parameters a view declared with its schema decorators."""
    body = getattr(view, BODY_ATTR, None)
    if body is not None:
        models.add(body)
        operation.setdefault("requestBody", {
            "required": getattr(view, BODY_REQUIRED_ATTR, True),
            "content": {"application/json": {"schema": {"$ref": REF_TEMPLATE.format(
                model=body.__name__)}}}})
    query = getattr(view, QUERY_ATTR, None)
    if query is not None:
        operation["parameters"] = [*operation.get("parameters", []), *_query_parameters(query)]


def _model_components(models: set[type[BaseModel]]) -> dict[str, dict[str, Any]]:
    if not models:
        return {}
    ordered = sorted(models, key=lambda m: m.__name__)
    _, definitions = models_json_schema([(m, "validation") for m in ordered],
                                        ref_template=REF_TEMPLATE)
    return definitions.get("$defs", {})


# What gunicorn itself answers, before any route runs, to a request line or headers over its
# limits (8190 bytes a line, 100 headers): its own short HTML page, not problem+json.
HTTP_SERVER_REJECTIONS = {
    status: {"$ref": "#/components/responses/HttpServerRejection"} for status in ("414", "431")}


def _default_responses(method: str) -> dict[str, Any]:
    """A route without YAML: success (201 too where it may create), else problem+json."""
    responses: dict[str, Any] = {"200": {"description": "success"}}
    if method in ("POST", "PUT"):
        responses["201"] = {"description": "created"}
    responses["default"] = {"$ref": "#/components/responses/Problem"}
    return responses


def build_spec(app: Flask, version: str = "1") -> dict[str, Any]:
    spec = APISpec(title="TideMQ HTTP gateway", version=version, openapi_version="3.1.0")
    models: set[type[BaseModel]] = set()
    spec.components.response("Problem", {
        "description": "an error (RFC 9457 problem+json) with a stable code",
        "content": {"application/problem+json": {"schema": "Problem"}}})
    spec.components.response("Unauthenticated", {
        "description": "UNAUTHENTICATED (auth on): no credentials, an unknown access key, a "
                       "wrong signature, a timestamp outside the allowed skew or an expired "
                       "bearer token",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
        "content": {"application/problem+json": {"schema": "Problem"}}})
    spec.components.response("PermissionDenied", {
        "description": "PERMISSION_DENIED (auth on): the ACL does not allow this user the "
                       "action on the resource (both named in `detail`)",
        "content": {"application/problem+json": {"schema": "Problem"}}})
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer",
                                               "description": "tmq1 token (tidemq acl token)"})
    spec.components.security_scheme("mqSignature", {
        "type": "apiKey", "in": "header", "name": "Authorization",
        "description": "MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, "
                       "Signature=<hex HMAC-SHA1(sk, x-mq-date-time)>, with x-mq-date-time"})
    spec.components.response("HttpServerRejection", {
        "description": "the HTTP server refused the request line or headers as too long "
                       "(before the API saw it): shorten the URL, or send the filter in a body",
        "content": {"text/html": {"schema": {"type": "string"}}}})
    paths: dict[str, dict[str, Any]] = {}
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if (rule.endpoint == "static" or rule.endpoint.split(".")[0] in SKIPPED_BLUEPRINTS
                or rule.endpoint in SKIPPED_ENDPOINTS):
            continue
        view = app.view_functions[rule.endpoint]
        documented = load_operations_from_docstring(view.__doc__ or "")
        summary = (view.__doc__ or rule.endpoint.rsplit(".", 1)[-1]).strip().splitlines()[0]
        path = FlaskPlugin.flaskpath2openapi(rule.rule)
        for method in sorted((rule.methods or set()) - SKIPPED_METHODS):
            operation = dict(documented.get(method.lower()) or {})
            operation.setdefault("summary", summary)
            _declared(view, operation, models)
            operation.setdefault("operationId", f"{rule.endpoint}.{method.lower()}")
            operation.setdefault("responses", _default_responses(method))
            operation["responses"].update(HTTP_SERVER_REJECTIONS)
            if rule.rule not in auth.OPEN_PATHS:  # docs/security.md
                operation["responses"].setdefault("401", {"$ref": "#/components/responses/"
                                                                  "Unauthenticated"})
                operation["responses"].setdefault("403", {"$ref": "#/components/responses/"
                                                                  "PermissionDenied"})
            params = _parameters(rule)
            if params:
                operation["parameters"] = [*params, *operation.get("parameters", [])]
            paths.setdefault(path, {})[method.lower()] = operation
    for name, schema in {**SCHEMAS, **OPERATOR_SCHEMAS, **_model_components(models)}.items():
        spec.components.schema(name, schema)
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


@openapi_bp.get("/openapi.json")
def openapi_document():
    """The OpenAPI 3 description of this HTTP API (generated from the routes)."""
    document = current_app.extensions.get("tidemq_openapi")
    if document is None:
        document = build_spec(current_app)
        settings = current_app.extensions.get(topic_routes.SETTINGS)
        if settings is not None:
            state_deployment_limits(document, settings)
        current_app.extensions["tidemq_openapi"] = document
    return jsonify(document)


PULL_PATH = "/v1/topics/{topic}/queues/{broker_name}/{queue_id}/messages"


def state_deployment_limits(document: dict[str, Any], settings) -> None:
    """The limits this gateway's settings put below the models' own (`within_setting`: wait_ms
    at most --max-pull-wait-ms, a pull's max at most --max-pull-messages), stated in the
    document it serves, so a request the document allows is one this gateway takes."""
    def cap(schema: dict[str, Any], high: int) -> None:
        schema["maximum"] = min(schema.get("maximum", high), high)

    schemas = document["components"]["schemas"]
    cap(schemas["PopRequest"]["properties"]["wait_ms"], settings.max_pull_wait_ms)
    for parameter in document["paths"][PULL_PATH]["get"]["parameters"]:
        high = {"max": settings.max_pull_messages,
                "wait_ms": settings.max_pull_wait_ms}.get(parameter["name"])
        if high is not None:
            cap(parameter["schema"], high)

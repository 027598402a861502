"""`GET /openapi.json`: the OpenAPI 3 document of every route, built from the app itself.

Paths and methods come from Flask's URL map (so a new route is described the moment it is
mounted), path parameters from its converters, and an operation's details from the YAML after
`---` in the view's docstring (apispec's convention); a view without YAML still gets its
summary from the docstring's first line and the shared problem+json error response. The
schemas of request and response bodies are the components below.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.yaml_utils import load_operations_from_docstring
from apispec_webframeworks.flask import FlaskPlugin
from flask import Blueprint, Flask, current_app, jsonify

openapi_bp = Blueprint("tidemq_openapi", __name__)
SKIPPED_METHODS = {"HEAD", "OPTIONS"}
CONVERTER_TYPES = {"IntegerConverter": "integer", "SignedIntegerConverter": "integer"}

_STR = {"type": "string"}
_INT = {"type": "integer"}
MESSAGE = {"type": "object", "properties": {
    "body": _STR, "encoding": {"type": "string", "enum": ["utf-8", "base64"]}, "tag": _STR,
    "keys": {"type": "array", "items": _STR}, "properties": {"type": "object"},
    "queue_offset": _INT, "msg_id": _STR, "unique_id": _STR, "born_timestamp": _INT,
    "store_timestamp": _INT, "reconsume_times": _INT}}
SCHEMAS: dict[str, dict[str, Any]] = {
    "Problem": {"type": "object", "required": ["type", "title", "status", "code", "detail"],
                "properties": {"type": _STR, "title": _STR, "status": _INT, "code": _STR,
                               "detail": _STR}},
    "Message": MESSAGE,
    "PopRequest": {"type": "object", "properties": {
        "max": {"type": "integer", "minimum": 1, "maximum": 32, "default": 16},
        "invisible_ms": {"type": "integer", "minimum": 1, "maximum": 43_200_000,
                         "default": 30_000},
        "wait_ms": {"type": "integer", "minimum": 0, "default": 0},
        "tag": {"type": "string", "default": "*"}}},
    "PoppedMessage": {"allOf": [{"$ref": "#/components/schemas/Message"}, {
        "type": "object", "properties": {"topic": _STR, "broker_name": _STR,
                                         "receipt_handle": _STR, "delivery_count": _INT}}]},
    "PopResponse": {"type": "object", "properties": {"messages": {
        "type": "array", "items": {"$ref": "#/components/schemas/PoppedMessage"}}}},
    "ReceiptHandleRequest": {"type": "object", "required": ["receipt_handle"],
                             "properties": {"receipt_handle": _STR}},
    "InvisibleRequest": {"type": "object", "required": ["receipt_handle", "invisible_ms"],
                         "properties": {"receipt_handle": _STR, "invisible_ms": {
                             "type": "integer", "minimum": 1, "maximum": 43_200_000}}},
    "DeadLetters": {"type": "object", "properties": {"messages": {"type": "array", "items": {
        "allOf": [{"$ref": "#/components/schemas/Message"}, {"type": "object", "properties": {
            "broker_name": _STR, "origin_topic": _STR, "origin_msg_id": _STR,
            "first_failure_ms": _INT}}]}}}},
    "TransactionOpenRequest": {"type": "object", "properties": {
        "producer_group": {"type": "string", "default": "tidemq-gateway-http"}}},
    "Transaction": {"type": "object", "properties": {
        "id": _STR, "producer_group": _STR, "state": _STR, "expires_ms": _INT}},
    "TransactionEnd": {"type": "object", "properties": {
        "id": _STR, "state": {"type": "string", "enum": ["COMMITTED", "ROLLED_BACK"]},
        "messages": _INT, "already_resolved": {"type": "boolean"}, "pending_ends": _INT}},
    "RedriveRequest": {"type": "object", "properties": {
        "msg_ids": {"type": "array", "items": _STR}, "all": {"type": "boolean"}}},
    "RedriveResponse": {"type": "object", "properties": {"redriven": {"type": "array", "items": {
        "type": "object", "properties": {"msg_id": _STR, "topic": _STR, "queue_id": _INT,
                                         "queue_offset": _INT}}}}},
}


def _parameters(rule) -> list[dict[str, Any]]:
    return [{"in": "path", "name": name, "required": True,
             "schema": {"type": CONVERTER_TYPES.get(type(converter).__name__, "string")}}
            for name, converter in rule._converters.items()]


def build_spec(app: Flask, version: str = "1") -> dict[str, Any]:
    spec = APISpec(title="TideMQ HTTP gateway", version=version, openapi_version="3.0.3")
    for name, schema in SCHEMAS.items():
        spec.components.schema(name, schema)
    spec.components.response("Problem", {
        "description": "an error (RFC 9457 problem+json) with a stable code",
        "content": {"application/problem+json": {"schema": "Problem"}}})
    paths: dict[str, dict[str, Any]] = {}
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if rule.endpoint == "static":
            continue
        view = app.view_functions[rule.endpoint]
        documented = load_operations_from_docstring(view.__doc__ or "")
        summary = (view.__doc__ or rule.endpoint.rsplit(".", 1)[-1]).strip().splitlines()[0]
        path = FlaskPlugin.flaskpath2openapi(rule.rule)
        for method in sorted((rule.methods or set()) - SKIPPED_METHODS):
            operation = dict(documented.get(method.lower()) or {})
            operation.setdefault("summary", summary)
            operation.setdefault("operationId", f"{rule.endpoint}.{method.lower()}")
            operation.setdefault("responses", {
                "200": {"description": "success"},
                "default": {"$ref": "#/components/responses/Problem"}})
            params = _parameters(rule)
            if params:
                operation["parameters"] = [*params, *operation.get("parameters", [])]
            paths.setdefault(path, {})[method.lower()] = operation
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


@openapi_bp.get("/openapi.json")
def openapi_document():
    """The OpenAPI 3 description of this HTTP API (generated from the routes)."""
    document = current_app.extensions.get("tidemq_openapi")
    if document is None:
        document = current_app.extensions["tidemq_openapi"] = build_spec(current_app)
    return jsonify(document)

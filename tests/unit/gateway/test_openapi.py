"""/openapi.json is generated from the app: every mounted route and method is described, path
parameters are declared, and every $ref points at a component that exists."""

from __future__ import annotations

import json
import re

from apispec_webframeworks.flask import FlaskPlugin
from flask import Blueprint
from tidemq.gateway.app import create_app
from tidemq.gateway.openapi import SKIPPED_ENDPOINTS
from tidemq.gateway.settings import GatewaySettings

from tests.unit.gateway.test_http_api import StubBackend


def document(app) -> dict:
    response = app.test_client().get("/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def test_every_route_and_method_is_described():
    app = create_app(object())
    spec = document(app)
    assert spec["openapi"].startswith("3.")
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.endpoint.startswith("tidemq_console."):
            continue  # the console's HTML pages are not part of the API
        if rule.endpoint in SKIPPED_ENDPOINTS:
            assert FlaskPlugin.flaskpath2openapi(rule.rule) not in spec["paths"]
            continue  # a route that only explains a mistake (always 400): not an operation
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            operation = spec["paths"][path][method.lower()]
            assert operation["responses"] and operation["summary"]
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == set(rule.arguments)
    assert not [path for path in spec["paths"] if path.startswith("/console")]
    search = spec["paths"]["/v1/topics/{topic}/messages"]["get"]
    assert {p["name"] for p in search["parameters"]} >= {"topic", "key", "begin_ms", "end_ms"}
    assert spec["paths"]["/v1/consumer-groups/{group}"]["get"]["responses"]["200"][
        "content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ConsumerGroup"}
    pop = spec["paths"]["/v1/groups/{group}/topics/{topic}/pop"]["post"]
    assert pop["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PopRequest"}


def test_every_reference_resolves():
    spec = document(create_app(object()))
    refs = re.findall(r'"\$ref": "#/([^"]+)"', json.dumps(spec))
    assert refs
    for ref in refs:
        node = spec
        for part in ref.split("/"):
            node = node[part]


def test_a_new_route_is_described_without_editing_the_document():
    app = create_app(object())
    extra = Blueprint("extra", __name__)

    @extra.get("/v1/extra/<int:n>")
    def extra_view(n: int):
        """An extra route."""
        return {"n": n}

    app.register_blueprint(extra)
    operation = document(app)["paths"]["/v1/extra/{n}"]["get"]
    assert operation["summary"] == "An extra route."
    assert operation["parameters"][0]["schema"] == {"type": "integer"}


def test_path_parameters_state_the_rules_the_server_checks_them_with():
    """Every path parameter of a name, id or key carries the server's own rule (pattern and
    length from tidemq.common.topic_names, tidemq.configclient.groups, tidemq.common.kv),
    and the server refuses what the pattern excludes."""
    import jsonschema_rs  # schemathesis' validator: JSON Schema's (ECMA-262) regular expressions
    from tidemq.common.errors import InvalidArgument
    from tidemq.common.kv import has_control_character
    from tidemq.common.topic_names import validate_topic_name
    from tidemq.configclient.groups import GroupDefinitionError, validate_group_name

    spec = document(create_app(object()))
    params = {}
    for operations in spec["paths"].values():
        for operation in operations.values():
            for p in operation.get("parameters", []):
                if p["in"] == "path":
                    params.setdefault(p["name"], []).append(p["schema"])
    assert all(s == schemas[0] for schemas in params.values() for s in schemas)
    schema = {name: schemas[0] for name, schemas in params.items()}

    def valid(name, value):
        return jsonschema_rs.is_valid(schema[name], value)

    def server_accepts(check, value):
        try:
            check(value)
            return True
        except (InvalidArgument, GroupDefinitionError):
            return False

    for value in ["orders", "a" * 249, "a" * 250, "", "or/ders", "orders\n", "%RETRY%x|y-z"]:
        assert valid("topic", value) == server_accepts(validate_topic_name, value), value
    for value in ["billing", "g" * 242, "g" * 243, "", "bill ing", "billing\n", "a%b|c-d_e"]:
        assert valid("group", value) == server_accepts(validate_group_name, value), value
        assert valid("name", value) == valid("group", value)
    for value in ["tidemq/topics/orders", "a\x00b", "line\nbreak", "del\x7f", "ünï cödé"]:
        assert valid("key", value) == (not has_control_character(value)), value
    assert valid("msg_id", "7F0000010000C0670000000000000000")
    assert not valid("msg_id", "7F00000100") and not valid("queue_id", -1)


def test_the_served_document_states_this_gateways_pull_limits():
    """--max-pull-wait-ms and --max-pull-messages bound wait_ms and max below the models'
    own limits: the document a gateway serves says so (a request it allows is taken)."""
    app = create_app(StubBackend(), GatewaySettings(max_pull_wait_ms=50, max_pull_messages=7))
    document = app.test_client().get("/openapi.json").get_json()
    assert document["components"]["schemas"]["PopRequest"]["properties"]["wait_ms"][
        "maximum"] == 50
    pull = document["paths"]["/v1/topics/{topic}/queues/{broker_name}/{queue_id}/messages"]
    limits = {p["name"]: p["schema"].get("maximum") for p in pull["get"]["parameters"]}
    assert limits["wait_ms"] == 50 and limits["max"] == 7

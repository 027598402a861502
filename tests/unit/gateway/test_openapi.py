"""/openapi.json is generated from the app: every mounted route and method is described, path
parameters are declared, and every $ref points at a component that exists."""

from __future__ import annotations

import json
import re

from flask import Blueprint
from tidemq.gateway.app import create_app


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

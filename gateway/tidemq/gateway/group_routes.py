"""HTTP face of subscription-group definitions (config-center `/tidemq/groups/<name>`).

  POST   /v1/groups            create {"name", ...fields}      201 + ETag / 409
  GET    /v1/groups            every definition (+ the invalid ones and why)
  GET    /v1/groups/<name>     one definition + ETag: "<revision>"  / 404
  PATCH  /v1/groups/<name>     change some fields; If-Match: "<rev>" optional  200 / 412
  DELETE /v1/groups/<name>     If-Match optional  200 / 404 / 412

The schema and the compare-and-set writes are tidemq.configclient.groups' (the same code the
CLI uses and the brokers parse with; bodies.py declares its fields for validation and
OpenAPI); brokers apply a change live.
"""

from __future__ import annotations

from flask import Blueprint, jsonify
from tidemq.configclient.groups import DefinedGroup, SubscriptionGroups
from tidemq.gateway.bodies import GroupCreateRequest, GroupPatchRequest
from tidemq.gateway.config_routes import _client, parse_revision_header
from tidemq.gateway.schema import accepts_body

groups_bp = Blueprint("tidemq_groups", __name__)


def _groups() -> SubscriptionGroups:
    return SubscriptionGroups(_client())


def _body(defined: DefinedGroup) -> dict:
    return {**defined.config.to_json(), "revision": defined.revision}


def _etag(defined: DefinedGroup) -> dict[str, str]:
    return {"ETag": f'"{defined.revision}"'}


@groups_bp.post("/v1/groups")
@accepts_body(GroupCreateRequest)
def create_group(body: GroupCreateRequest):
    """Define a subscription group (unset fields take their defaults)."""
    fields = body.model_dump(exclude_unset=True)
    name = fields.pop("name")
    defined = _groups().create(name, **fields)
    return jsonify(_body(defined)), 201, {**_etag(defined), "Location": f"/v1/groups/{name}"}


@groups_bp.get("/v1/groups")
def list_groups():
    listed = _groups().list()
    return jsonify({
        "groups": [_body(d) for d in listed if isinstance(d, DefinedGroup)],
        "invalid": [{"name": d[0], "detail": d[1]} for d in listed
                    if not isinstance(d, DefinedGroup)],
    })


@groups_bp.get("/v1/groups/<name>")
def get_group(name: str):
    defined = _groups().get(name)
    return jsonify(_body(defined)), 200, _etag(defined)


@groups_bp.patch("/v1/groups/<name>")
@accepts_body(GroupPatchRequest)
def update_group(name: str, body: GroupPatchRequest):
    """Change some fields of a definition (If-Match: "<revision>" optional)."""
    defined = _groups().update(name, body.model_dump(exclude_unset=True),
                               if_revision=parse_revision_header("If-Match"))
    return jsonify(_body(defined)), 200, _etag(defined)


@groups_bp.delete("/v1/groups/<name>")
def delete_group(name: str):
    _groups().delete(name, if_revision=parse_revision_header("If-Match"))
    return jsonify({"name": name, "deleted": True})

"""HTTP face of subscription-group definitions (config-center `/tidemq/groups/<name>`).

  POST   /v1/groups            create {"name", ...fields}      201 + ETag / 409
  GET    /v1/groups            every definition (+ the invalid ones and why), and the groups
                               that consume without one (as the brokers list them)
  GET    /v1/groups/<name>     one definition + ETag: "<revision>"  / 404
  PATCH  /v1/groups/<name>     change some fields; If-Match: "<rev>" optional  200 / 412
  DELETE /v1/groups/<name>     If-Match optional  200 / 404 / 412

The schema and the compare-and-set writes are tidemq.configclient.groups' (the same code the
CLI uses and the brokers parse with; bodies.py declares its fields for validation and
OpenAPI); brokers apply a change live.
"""

from __future__ import annotations

from flask import Blueprint, jsonify
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger
from tidemq.configclient.groups import DefinedGroup, SubscriptionGroups
from tidemq.gateway.bodies import GroupCreateRequest, GroupPatchRequest
from tidemq.gateway.config_routes import _client, parse_revision_header
from tidemq.gateway.schema import accepts_body
from tidemq.gateway.topic_routes import _backend

groups_bp = Blueprint("tidemq_groups", __name__)
log = get_logger(__name__)


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


def _consumed() -> dict[str, str] | None:
    """group -> how it consumed (push / pop / pull), from the brokers; None when they could
    not be asked (the definitions are still listed)."""
    try:
        return {g["group_id"]: g["consume_type"] for g in _backend().admin.consumer_groups()}
    except TideMQError as exc:
        log.warning("listing the consuming groups failed", error=str(exc))
        return None


@groups_bp.get("/v1/groups")
def list_groups():
    """Every definition, and every group that consumed without one (it consumes with the
    defaults), each with how it consumed (`consume_type` push / pop / pull, null: not yet).
    ---
    get:
      summary: Subscription-group definitions and the groups that consume without one
      responses:
        "200":
          description: definitions (defined true), undefined consuming groups, invalid documents
          content:
            application/json:
              schema: GroupList
        "503": {$ref: "#/components/responses/Problem"}
    """
    listed = _groups().list()
    consumed = _consumed()
    known = consumed or {}
    definitions = [d for d in listed if isinstance(d, DefinedGroup)]
    named = {d.config.name for d in definitions} | {d[0] for d in listed
                                                    if not isinstance(d, DefinedGroup)}
    return jsonify({
        "groups": [{**_body(d), "defined": True, "consume_type": known.get(d.config.name)}
                   for d in definitions],
        "undefined": [{"name": name, "defined": False, "consume_type": consume_type}
                      for name, consume_type in sorted(known.items()) if name not in named],
        "invalid": [{"name": d[0], "detail": d[1]} for d in listed
                    if not isinstance(d, DefinedGroup)],
        "consumption_known": consumed is not None,
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

"""HTTP face of the config center: GET/PUT/DELETE /v1/config/<key> with If-Match revisions.

The URL path after /v1/config is the key (`/v1/config/tidemq/topics/orders` is the key
`/tidemq/topics/orders`). Revisions travel as ETags: a GET answers `ETag: "<mod_revision>"`; a
PUT or DELETE with `If-Match: "<rev>"` only applies if the key is still at that revision
(412 PRECONDITION_FAILED otherwise), and `If-None-Match: *` creates only if absent. A GET with
`?prefix=true` lists every key under the path; `?revision=R` reads the key (or the listing) as
it was at a retained revision R; `?history=true` lists its retained changes (`&limit=N`: the
newest N), oldest first. Errors are raised as TideMQError and rendered as
problem+json by the gateway's single error handler.
"""

from __future__ import annotations

import base64

from flask import Blueprint, current_app, jsonify, request
from tidemq.common.errors import (
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    ServiceUnavailable,
)
from tidemq.configclient.client import ConfigClient, KeyValue
from tidemq.gateway.bodies import ConfigReadQuery
from tidemq.gateway.schema import accepts_query

config_bp = Blueprint("tidemq_config", __name__)
EXTENSION = "tidemq.config_client"


def _client() -> ConfigClient:
    client = current_app.extensions.get(EXTENSION)
    if client is None:
        raise ServiceUnavailable("this gateway has no config-center client configured")
    return client


def _kv_json(kv: KeyValue) -> dict:
    try:
        value, encoding = kv.value.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        value, encoding = base64.b64encode(kv.value).decode("ascii"), "base64"
    return {"key": kv.key, "value": value, "encoding": encoding,
            "create_revision": kv.create_revision, "mod_revision": kv.mod_revision,
            "version": kv.version, "lease": kv.lease}


def parse_revision_header(name: str) -> int | None:
    """The revision in If-Match (quoted or bare), or None when the header is absent."""
    raw = request.headers.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if text.startswith("W/"):
        text = text[2:]
    text = text.strip('"')
    if not text.isdigit() or len(text) > 18:
        raise InvalidArgument(f"{name} must be a revision such as \"42\", got {raw!r}")
    return int(text)


def _expected_revision() -> int | None:
    expected = parse_revision_header("If-Match")
    if request.headers.get("If-None-Match", "").strip() == "*":
        if expected is not None:
            raise InvalidArgument("send either If-Match or If-None-Match: *, not both")
        return 0
    return expected


def _etag(revision: int) -> dict[str, str]:
    return {"ETag": f'"{revision}"'}


@config_bp.route("/v1/config/", methods=["GET", "PUT", "DELETE"])
def empty_key():
    raise InvalidArgument("the key must not be empty: use /v1/config/<key>")


@config_bp.get("/v1/config/<path:key>")
@accepts_query(ConfigReadQuery)
def get_key(key: str, query: ConfigReadQuery):
    """Read a key (ETag: its revision), with prefix=true every key under it, with
    history=true its retained changes."""
    key, revision = "/" + key, query.revision
    if query.history:
        events = _client().history(key, query.limit)
        return jsonify({"key": key, "events": [
            {"type": str(event.type), **_kv_json(event.kv)} for event in events]})
    if query.prefix:
        result = _client().range(key, revision=revision)
        return jsonify({"revision": result.revision, "kvs": [_kv_json(kv) for kv in result.kvs]})
    kv = _client().get(key, revision=revision)
    if kv is None:
        when = f" at revision {revision}" if revision else ""
        raise NotFound(f"key {key!r} does not exist{when}")
    return jsonify(_kv_json(kv)), 200, _etag(kv.mod_revision)


@config_bp.put("/v1/config/<path:key>")
def put_key(key: str):
    key = "/" + key
    expected = _expected_revision()
    result = _client().put(key, request.get_data(), expected_revision=expected)
    if not result.succeeded:
        current = result.current_mod_revision
        state = f"is at revision {current}" if current else "does not exist"
        if expected == 0:
            state = f"already exists at revision {current}"
        raise PreconditionFailed(f"key {key!r} {state}; nothing was written")
    status = 201 if result.current_mod_revision == 0 else 200
    return jsonify({"key": key, "revision": result.revision}), status, _etag(result.revision)


@config_bp.delete("/v1/config/<path:key>")
def delete_key(key: str):
    key = "/" + key
    expected = _expected_revision()
    result = _client().delete(key, expected_revision=expected)
    if not result.succeeded:
        raise PreconditionFailed(
            f"key {key!r} is at revision {result.current_mod_revision}; nothing was deleted")
    if not result.deleted:
        raise NotFound(f"key {key!r} does not exist")
    return jsonify({"key": key, "revision": result.revision})

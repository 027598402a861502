"""HTTP face of transactions (docs/http-api.md, "Transactions"). Thin views: parse -> one
HttpTransactions call -> JSON; the state lives in the config center (transactions.py).

  POST /v1/transactions                     {"producer_group"?} -> 201 {"id", ...}
  POST /v1/topics/<topic>/messages          {"messages": [...], "transaction_id": id}
  GET  /v1/transactions/<id>                -> 200 {"id", "state", "messages", ...}
  POST /v1/transactions/<id>/commit         -> 200 {"id", "state": "COMMITTED", ...}
  POST /v1/transactions/<id>/rollback       -> 200 {"id", "state": "ROLLED_BACK", ...}
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request
from tidemq.common.errors import InvalidArgument
from tidemq.gateway import validation
from tidemq.gateway.backend import GATEWAY_GROUP
from tidemq.gateway.topic_routes import _backend

transactions_bp = Blueprint("tidemq_transactions", __name__)


@transactions_bp.post("/v1/transactions")
def open_transaction():
    """Open a transaction: messages sent with its id stay invisible until it is committed.
    ---
    post:
      requestBody:
        required: false
        content:
          application/json:
            schema: TransactionOpenRequest
      responses:
        "201":
          description: the open transaction
          content:
            application/json:
              schema: Transaction
        default:
          $ref: "#/components/responses/Problem"
    """
    raw = request.get_data()
    document = validation.parse_json(raw) if raw.strip() else {}
    if not isinstance(document, dict):
        raise InvalidArgument("the request body must be a JSON object", code="INVALID_REQUEST")
    opened = _backend().transactions.open(document.get("producer_group", GATEWAY_GROUP))
    return jsonify({key: opened[key] for key in ("id", "producer_group", "state",
                                                 "expires_ms")}), 201, {
        "Location": f"/v1/transactions/{opened['id']}"}


@transactions_bp.get("/v1/transactions/<tx_id>")
def describe_transaction(tx_id: str):
    """A transaction's state (OPEN, COMMITTED, ROLLED_BACK) and how many messages it holds."""
    return jsonify(_backend().transactions.describe(tx_id))


@transactions_bp.post("/v1/transactions/<tx_id>/commit")
def commit_transaction(tx_id: str):
    """Commit a transaction: its messages become visible (once, also if committed again).
    ---
    post:
      responses:
        "200":
          description: the ended transaction
          content:
            application/json:
              schema: TransactionEnd
        default:
          $ref: "#/components/responses/Problem"
    """
    return jsonify(_backend().transactions.commit(tx_id))


@transactions_bp.post("/v1/transactions/<tx_id>/rollback")
def rollback_transaction(tx_id: str):
    """Roll a transaction back: its messages are never delivered.
    ---
    post:
      responses:
        "200":
          description: the ended transaction
          content:
            application/json:
              schema: TransactionEnd
        default:
          $ref: "#/components/responses/Problem"
    """
    return jsonify(_backend().transactions.rollback(tx_id))

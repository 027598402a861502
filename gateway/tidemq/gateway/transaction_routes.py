"""HTTP face of transactions (docs/http-api.md, "Transactions"). Thin views: parse -> one
HttpTransactions call -> JSON; the state lives in the config center (transactions.py).

  POST /v1/transactions                     {"producer_group"?} -> 201 {"id", ...}
  POST /v1/topics/<topic>/messages          {"messages": [...], "transaction_id": id}
  GET  /v1/transactions/<id>                -> 200 {"id", "state", "messages", ...}
  POST /v1/transactions/<id>/commit         -> 200 {"id", "state": "COMMITTED", ...}
  POST /v1/transactions/<id>/rollback       -> 200 {"id", "state": "ROLLED_BACK", ...}

The YAML after `---` in each view's docstring is its OpenAPI operation (openapi.py).
"""

from __future__ import annotations

from flask import Blueprint, jsonify
from tidemq.gateway.bodies import TransactionEndRequest, TransactionOpenRequest
from tidemq.gateway.schema import accepts_body
from tidemq.gateway.topic_routes import _backend

transactions_bp = Blueprint("tidemq_transactions", __name__)


@transactions_bp.post("/v1/transactions")
@accepts_body(TransactionOpenRequest, required=False)
def open_transaction(body: TransactionOpenRequest):
    """Open a transaction: messages sent with its id stay invisible until it is committed.
    ---
    post:
      responses:
        "201":
          description: 'the open transaction: {"id", "producer_group", "state", "expires_ms"}'
        default:
          $ref: "#/components/responses/Problem"
    """
    opened = _backend().transactions.open(body.producer_group)
    return jsonify({key: opened[key] for key in ("id", "producer_group", "state",
                                                 "expires_ms")}), 201, {
        "Location": f"/v1/transactions/{opened['id']}"}


@transactions_bp.get("/v1/transactions/<tx_id>")
def describe_transaction(tx_id: str):
    """A transaction's state (OPEN, COMMITTED, ROLLED_BACK) and how many messages it holds."""
    return jsonify(_backend().transactions.describe(tx_id))


@transactions_bp.post("/v1/transactions/<tx_id>/commit")
@accepts_body(TransactionEndRequest, required=False)
def commit_transaction(tx_id: str, body: TransactionEndRequest):
    """Commit a transaction: its messages become visible (once, also if committed again).
    ---
    post:
      responses:
        "200":
          description: >-
            the ended transaction: {"id", "state" (COMMITTED | ROLLED_BACK), "messages",
            "already_resolved", "pending_ends"}
        default:
          $ref: "#/components/responses/Problem"
    """
    return jsonify(_backend().transactions.commit(tx_id))


@transactions_bp.post("/v1/transactions/<tx_id>/rollback")
@accepts_body(TransactionEndRequest, required=False)
def rollback_transaction(tx_id: str, body: TransactionEndRequest):
    """Roll a transaction back: its messages are never delivered.
    ---
    post:
      responses:
        "200":
          description: >-
            the ended transaction: {"id", "state" (COMMITTED | ROLLED_BACK), "messages",
            "already_resolved", "pending_ends"}
        default:
          $ref: "#/components/responses/Problem"
    """
    return jsonify(_backend().transactions.rollback(tx_id))

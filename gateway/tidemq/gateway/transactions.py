"""HTTP transactions (docs/http-api.md, "Transactions"): open, send into, commit, roll back.

An HTTP transaction groups the half messages of several sends, made through a
TransactionProducer of its producer group, and ends them all at once. Gunicorn runs several
workers and any of them may take the next request of a transaction, or the broker's check-back
for one of its messages, so its state is not in a worker's memory but in one config-center key
`/tidemq/gateway/transactions/<id>` (JSON: producer group, state, the prepared messages) under a
lease: `ttl_s` while OPEN, RESOLVED_KEEP_S once committed or rolled back. Every half message
carries the transaction id in the property GATEWAY_TRANSACTION_ID, so a check-back answers from
that key: OPEN -> UNKNOWN (ask again later), COMMITTED -> COMMIT (if the message is one the
transaction recorded), ROLLED_BACK or gone (the open transaction expired) -> ROLLBACK. A send
request that fails part-way rolls back the messages it had prepared.

The state changes before the ends are sent (a compare-and-set on the key), so a commit whose
ends partly fail is still completed by the check-backs. No Flask here.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from tidemq.client import (
    Message,
    MessageExt,
    SendResult,
    SendStatus,
    TransactionProducer,
    TransactionResolution,
)
from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.topic_names import (
    MAX_TOPIC_NAME_LEN,
    TOPIC_NAME_ALPHABET,
    TOPIC_NAME_CHARS,
)
from tidemq.configclient.client import ConfigClient

log = get_logger(__name__)

PREFIX = "/tidemq/gateway/transactions/"
DEFAULT_PRODUCER_GROUP = "tidemq-gateway-http"
PROP_TRANSACTION = "GATEWAY_TRANSACTION_ID"
OPEN, COMMITTED, ROLLED_BACK = "OPEN", "COMMITTED", "ROLLED_BACK"
# Kept this long after the end so check-backs of ends that failed still find the outcome:
# longer than a broker's whole check-back window (6 s + 15 x 60 s by default).
RESOLVED_KEEP_S = 3600
_ID = re.compile(r"^[0-9a-f]{32}$")
CAS_ATTEMPTS = 20


def _not_found(tx_id: str) -> errors.NotFound:
    return errors.NotFound(f"no open or recent HTTP transaction {tx_id!r} (unknown, or it "
                           "expired and was rolled back)", code="TRANSACTION_NOT_FOUND")


def check_producer_group(group: str) -> str:
    if not isinstance(group, str) or not 0 < len(group) <= MAX_TOPIC_NAME_LEN or set(group) - TOPIC_NAME_CHARS:
        raise errors.InvalidArgument(f"producer_group must be 1..{MAX_TOPIC_NAME_LEN} of "
                                     f"[{TOPIC_NAME_ALPHABET}], got "
                                     f"{group!r}", code="INVALID_PRODUCER_GROUP")
    return group


class HttpTransactions:
    def __init__(self, config: ConfigClient,
                 new_producer: Callable[..., TransactionProducer], *, ttl_s: int) -> None:
        self.config = config
        self.new_producer = new_producer   # (producer_group, check_listener) -> producer
        self.ttl_s = ttl_s
        self._producers: dict[str, TransactionProducer] = {}
        self._lock = threading.Lock()

    def producer(self, group: str) -> TransactionProducer:
        with self._lock:
            if group not in self._producers:
                self._producers[group] = self.new_producer(group, self.check)
            return self._producers[group]

    # -- the key -------------------------------------------------------------------------------

    def _get(self, tx_id: str):
        if not _ID.match(tx_id or ""):
            raise _not_found(tx_id)
        kv = self.config.get(PREFIX + tx_id)
        if kv is None:
            raise _not_found(tx_id)
        return kv, kv.json()

    def _change(self, tx_id: str, change: Callable[[dict], dict | None],
                ttl_s: int | None = None) -> dict:
        """Compare-and-set the transaction's document; `change` returns the new one (None:
        leave it). `ttl_s`: under a new lease of that length, else under its lease."""
        for _ in range(CAS_ATTEMPTS):
            kv, doc = self._get(tx_id)
            new = change(dict(doc))
            if new is None:
                return doc
            lease = self.config.lease_grant(ttl_s) if ttl_s else kv.lease
            if self.config.put(PREFIX + tx_id, new, expected_revision=kv.mod_revision,
                               lease=lease).succeeded:
                return new
        raise errors.Conflict(f"HTTP transaction {tx_id!r} kept changing; try again",
                              code="TRANSACTION_BUSY")

    # -- operations ----------------------------------------------------------------------------

    def open(self, producer_group: str) -> dict:
        check_producer_group(producer_group)
        self.producer(producer_group)  # its check stream opens with its first prepare
        tx_id = uuid.uuid4().hex
        expires_ms = int(time.time() * 1000) + self.ttl_s * 1000
        doc = {"id": tx_id, "producer_group": producer_group, "state": OPEN,
               "expires_ms": expires_ms, "messages": []}
        lease = self.config.lease_grant(self.ttl_s)
        self.config.put(PREFIX + tx_id, doc, expected_revision=0, lease=lease)
        return doc

    def describe(self, tx_id: str) -> dict:
        _, doc = self._get(tx_id)
        return {"id": tx_id, "producer_group": doc["producer_group"], "state": doc["state"],
                "expires_ms": doc["expires_ms"], "messages": len(doc["messages"])}

    def send(self, tx_id: str, messages: Sequence[Message]) -> list[SendResult]:
        """Prepare `messages` as half messages of the open transaction `tx_id`."""
        _, doc = self._get(tx_id)
        _check_open(doc)
        producer = self.producer(doc["producer_group"])
        results: list[SendResult] = []
        try:
            for message in messages:
                results.append(producer.prepare(dataclasses.replace(
                    message, properties={**message.properties, PROP_TRANSACTION: tx_id})))
        except errors.TideMQError:
            for result in results:  # the request failed: none of its messages may commit
                self._end_quietly(producer, result, TransactionResolution.ROLLBACK)
            raise
        prepared = [_result_json(r, m.topic) for r, m in zip(results, messages, strict=True)]

        def add(current: dict) -> dict:
            _check_open(current)
            current["messages"] = [*current["messages"], *prepared]
            return current

        try:
            self._change(tx_id, add)
        except errors.TideMQError:
            for result in results:  # the transaction ended or expired meanwhile
                self._end_quietly(producer, result, TransactionResolution.ROLLBACK)  # same worker
            raise
        return results

    def commit(self, tx_id: str) -> dict:
        return self._end(tx_id, COMMITTED, TransactionResolution.COMMIT)

    def rollback(self, tx_id: str) -> dict:
        return self._end(tx_id, ROLLED_BACK, TransactionResolution.ROLLBACK)

    def _end(self, tx_id: str, state: str, resolution: TransactionResolution) -> dict:
        already = []

        def resolve(current: dict) -> dict | None:
            if current["state"] == state:
                already.append(True)
                return None
            _check_open(current)
            current["state"] = state
            return current

        doc = self._change(tx_id, resolve, ttl_s=RESOLVED_KEEP_S)
        producer = self.producer(doc["producer_group"])
        failed = 0
        if not already:
            for prepared in doc["messages"]:
                failed += not self._end_quietly(producer, _send_result(prepared), resolution,
                                                prepared["topic"])
        return {"id": tx_id, "state": state, "messages": len(doc["messages"]),
                "already_resolved": bool(already), "pending_ends": failed}

    @staticmethod
    def _end_quietly(producer: TransactionProducer, result: SendResult,
                     resolution: TransactionResolution, topic: str = "") -> bool:
        """End one half message; a failure is left to the broker's check-back (logged)."""
        try:
            producer.end(result, resolution, topic=topic)
            return True
        except errors.TideMQError as exc:
            log.warning("end of a gateway transaction message failed; the check-back ends it",
                        transaction_id=result.unique_id, error=str(exc))
            return False

    # -- check-back ----------------------------------------------------------------------------

    def check(self, message: MessageExt) -> TransactionResolution:
        """The check listener of the gateway's TransactionProducers."""
        tx_id = message.properties.get(PROP_TRANSACTION, "")
        try:
            _, doc = self._get(tx_id)
        except errors.NotFound:
            return TransactionResolution.ROLLBACK   # expired while open, or never ours
        if doc["state"] == OPEN:
            return TransactionResolution.UNKNOWN
        recorded = any(m["unique_id"] == message.unique_id for m in doc["messages"])
        # only a message its send request reported stored commits with the transaction
        return (TransactionResolution.COMMIT if doc["state"] == COMMITTED and recorded
                else TransactionResolution.ROLLBACK)

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close()


def _check_open(doc: dict) -> None:
    if doc["state"] != OPEN:
        raise errors.Conflict(
            f"HTTP transaction {doc['id']!r} was {doc['state'].lower().replace('_', ' ')} "
            "already", code="TRANSACTION_ALREADY_RESOLVED")


def _result_json(result: SendResult, topic: str) -> dict:
    return {"topic": topic, "msg_id": result.msg_id, "unique_id": result.unique_id,
            "broker_name": result.broker_name, "queue_id": result.queue_id,
            "queue_offset": result.queue_offset}


def _send_result(prepared: dict) -> SendResult:
    return SendResult(SendStatus.SEND_OK, prepared["msg_id"], prepared["unique_id"],
                      prepared["broker_name"], prepared["queue_id"], prepared["queue_offset"])


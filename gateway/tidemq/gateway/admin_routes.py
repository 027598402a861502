"""HTTP face of the operator's reads and resets (what `tidemq cluster|group|message` show),
for scripts and for the web console. Thin views: parse → one AdminBackend call → JSON.

  GET  /v1/cluster                                 brokers, roles, replication state
  GET  /v1/cluster/control-plane                   config centers and their etcd members
  GET  /v1/cluster/consumed                        messages consumed per topic and broker group
  GET  /v1/cluster/throttled                       who client quotas throttle now, per broker
  GET  /v1/consumer-groups                         every group that consumed (push/pop/pull)
  GET  /v1/consumer-groups/<group>                 members, assignment, offsets and lag
  POST /v1/consumer-groups/<group>/reset-offsets   {"topic", "timestamp_ms"}
  DELETE /v1/consumer-groups/<group>/offsets/<topic>   forget its offsets of a topic
  GET  /v1/messages/<msg_id>                       one message by its offset message id
  GET  /v1/topics/<topic>/messages?key=&begin_ms=&end_ms=&max=   by key or time range
  GET  /v1/topics/<topic>/offsets?timestamp_ms=    per queue, the offset stored at a time

`/v1/groups` are subscription-group *definitions* (config center); `/v1/consumer-groups` are
the groups' live state on the brokers.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from tidemq.client.message import MessageExt
from tidemq.common.topic_names import validate_topic_name
from tidemq.gateway.bodies import MessageSearchQuery, OffsetResetRequest, OffsetsAtQuery
from tidemq.gateway.consume_routes import _group
from tidemq.gateway.messages import message_json
from tidemq.gateway.schema import accepts_body, accepts_query
from tidemq.gateway.topic_routes import _backend

admin_bp = Blueprint("tidemq_admin", __name__)


def _admin():
    return _backend().admin


def trace_id_of(traceparent: str) -> str:
    """The trace id of a W3C traceparent (`00-<32 hex>-<16 hex>-<2 hex>`), or ""."""
    parts = traceparent.split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and parts[1].strip("0123456789abcdef") == "":
        return parts[1] if parts[1].strip("0") else ""
    return ""


def located_message_json(message: MessageExt) -> dict[str, Any]:
    """A stored message with where it is and the trace context its producer sent."""
    traceparent = message.trace_carrier.get("traceparent", "")
    return {**message_json(message), "topic": message.topic,
            "broker_name": message.broker_name, "queue_id": message.queue_id,
            "trace_context": traceparent, "trace_id": trace_id_of(traceparent)}


@admin_bp.get("/v1/cluster")
def cluster():
    """Every registered broker (role MASTER or SLAVE, replication lag) and the replication
    controller's state (DescribeReplication; no groups when replication is off).
    ---
    get:
      summary: Brokers, roles and replication state
      responses:
        "200":
          description: the cluster as the name servers and the controller see it
          content:
            application/json:
              schema: Cluster
        "503": {$ref: "#/components/responses/Problem"}
    """
    return jsonify(_admin().cluster())


@admin_bp.get("/v1/cluster/control-plane")
def control_plane():
    """Each config-center instance reachable or not, and the etcd cluster that holds their
    state as the first that answered sees it: every member with the raft leader and term, its
    committed and applied index and how many entries it trails the leader (as `tidemq cluster
    control-plane -o json`). Read-only.
    ---
    get:
      summary: Config centers and the etcd members behind them
      responses:
        "200":
          description: every configured config-center address, and the store's members
          content:
            application/json:
              schema: ControlPlane
        "503": {$ref: "#/components/responses/Problem"}
    """
    return jsonify(_admin().control_plane())


@admin_bp.get("/v1/cluster/consumed")
def consumed():
    """Messages handed to consumers so far, per topic and broker group: every record a pull
    or pop answer carried (SDK consumers, the HTTP fetch and pop, RocketMQ 5 clients), summed
    over the group's replicas, each counted since its process started (the brokers'
    tidemq_broker_messages_consumed_total). A replica that did not answer is named in
    `unanswered` and left out of the sums.
    ---
    get:
      summary: Messages consumed per topic and broker group (counters)
      responses:
        "200":
          description: per topic, per broker group, records handed to consumers
          content:
            application/json:
              schema: Consumed
        "503": {$ref: "#/components/responses/Problem"}
    """
    return jsonify(_admin().consumed())


@admin_bp.get("/v1/cluster/throttled")
def throttled():
    """Who client quotas throttle now (docs/quotas.md): on every registered broker, each
    entity (`user:<name>` or `client:<id>`) whose next request would wait, the quota, and how
    long (its throttle time), most owed first. A broker that did not answer is named in
    `unanswered`.
    ---
    get:
      summary: Entities throttled by client quotas now, per broker
      responses:
        "200":
          description: the throttled entities
          content:
            application/json:
              schema: Throttled
        "503": {$ref: "#/components/responses/Problem"}
    """
    return jsonify(_admin().throttled())


@admin_bp.get("/v1/consumer-groups")
def consumer_groups():
    """Every group that consumed (joined a coordinator, popped, or committed offsets), with
    how it consumes, whether it is defined, and for a push group its state and members.
    ---
    get:
      summary: List the groups that consume (as `tidemq group list`)
      responses:
        "200":
          description: one entry per group
          content:
            application/json:
              schema: ConsumerGroups
        "503": {$ref: "#/components/responses/Problem"}
    """
    return jsonify({"groups": _admin().consumer_groups()})


@admin_bp.get("/v1/consumer-groups/<group>")
def describe_consumer_group(group: str):
    """Members and their queues, and per queue the committed offset, max offset and lag.
    ---
    get:
      summary: Describe a consumer group (as `tidemq group describe -o json`)
      responses:
        "200":
          description: the group with its lag per queue and in total
          content:
            application/json:
              schema: ConsumerGroup
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    return jsonify(_admin().describe_group(_group(group)))


@admin_bp.post("/v1/consumer-groups/<group>/reset-offsets")
@accepts_body(OffsetResetRequest)
def reset_offsets(group: str, body: OffsetResetRequest):
    """Move the group's committed offsets of a topic to a time (refused while it has live
    members: 412 NON_EMPTY_GROUP).
    ---
    post:
      summary: Reset a group's offsets of a topic to a time
      responses:
        "200":
          description: the new committed offset of every queue
          content:
            application/json:
              schema: OffsetReset
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
        "412": {$ref: "#/components/responses/Problem"}
    """
    offsets = _admin().reset_offsets(_group(group), body.topic, body.timestamp_ms)
    return jsonify({"group": group, "topic": body.topic, "timestamp_ms": body.timestamp_ms,
                    "offsets": offsets})


@admin_bp.delete("/v1/consumer-groups/<group>/offsets/<topic>")
def delete_offsets(group: str, topic: str):
    """Forget the group's committed offsets of a topic on every broker, e.g. of a deleted
    topic that the group's describe shows as orphaned (refused while it has live members:
    412 NON_EMPTY_GROUP).
    ---
    delete:
      summary: Delete a group's committed offsets of a topic (as `tidemq group delete-offsets`)
      responses:
        "200":
          description: the brokers that held offsets of it
        "400": {$ref: "#/components/responses/Problem"}
        "412": {$ref: "#/components/responses/Problem"}
    """
    validate_topic_name(topic)
    dropped = _admin().delete_offsets(_group(group), topic)
    return jsonify({key: dropped[key] for key in ("group", "topic", "brokers")})


@admin_bp.get("/v1/messages/<msg_id>")
def view_message(msg_id: str):
    """One stored message by its offset message id (as `tidemq message view`).
    ---
    get:
      summary: View a message by its msg id
      responses:
        "200":
          description: the message, where it is stored and its producer's trace context
          content:
            application/json:
              schema: LocatedMessage
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    return jsonify(located_message_json(_admin().view_message(msg_id)))


@admin_bp.get("/v1/topics/<topic>/messages")
@accepts_query(MessageSearchQuery)
def search_messages(topic: str, query: MessageSearchQuery):
    """Messages of a topic carrying `key`, or (no key) stored in [begin_ms, end_ms).
    ---
    get:
      summary: Find messages by key or time range, oldest first
      responses:
        "200":
          description: the messages found (possibly none)
          content:
            application/json:
              schema: FoundMessages
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    validate_topic_name(topic)
    if query.key:
        found = _admin().query_by_key(topic, query.key, query.begin_ms, query.end_ms, query.max)
    else:
        found = _admin().query_by_time(topic, query.begin_ms, query.end_ms, query.max)
    return jsonify({"messages": [located_message_json(m) for m in found]})


@admin_bp.get("/v1/topics/<topic>/offsets")
@accepts_query(OffsetsAtQuery)
def offsets_at(topic: str, query: OffsetsAtQuery):
    """Per queue, the first offset stored at or after a time (as `tidemq offset for-time`);
    with a topic's max offsets, how many messages arrived since.
    ---
    get:
      summary: Queue offsets at a time
      responses:
        "200":
          description: one offset per queue
          content:
            application/json:
              schema: OffsetsAt
        "400": {$ref: "#/components/responses/Problem"}
        "404": {$ref: "#/components/responses/Problem"}
    """
    validate_topic_name(topic)
    return jsonify({"topic": topic, "timestamp_ms": query.timestamp_ms,
                    "offsets": _admin().offsets_at(topic, query.timestamp_ms)})

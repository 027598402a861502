"""What the operator's HTTP routes call (admin_routes.py): the cluster, live consumer groups,
offset resets and message look-ups, over the SDK's `Admin` (the code `tidemq` runs, so the
HTTP answers and the CLI's figures are the same numbers).

A look-up by time range has no broker RPC of its own: per queue, the first offset stored at
or after `begin_ms` (SearchOffset), then a bounded pull from there, keeping what was stored
before `end_ms`.
"""

from __future__ import annotations

from tidemq.client import MessageQueue, PullConsumer
from tidemq.client.admin import Admin, GroupDescription
from tidemq.client.message import MessageExt
from tidemq.gateway.settings import GatewaySettings


class AdminBackend:
    def __init__(self, settings: GatewaySettings, consumer: PullConsumer) -> None:
        self.admin = Admin(settings.namesrv_addrs, config_center=settings.config_center,
                           timeout=settings.rpc_timeout_s)
        self.consumer = consumer

    # -- cluster -------------------------------------------------------------------------

    def cluster(self) -> dict:
        brokers = self.admin.cluster_info()
        return {
            "brokers": [{**vars(b), "id": b.id, "role": b.role.upper()} for b in brokers],
            "replication": self.admin.replication(),
        }

    def control_plane(self) -> dict:
        """Each config-center instance and the Redis tier behind them: the shape of
        `tidemq cluster control-plane -o json` (SERVICE_UNAVAILABLE when none answers)."""
        return self.admin.config.control_plane().to_json()

    def consumed(self) -> dict:
        """Records handed to consumers per topic and broker group (Admin.consumed)."""
        counts, unanswered = self.admin.consumed()
        return {"consumed": counts, "unanswered": unanswered}

    def throttled(self) -> dict:
        """Who client quotas throttle now, per broker (Admin.throttled, docs/quotas.md)."""
        rows, unanswered = self.admin.throttled()
        return {"throttled": rows, "unanswered": unanswered}

    # -- consumer groups -----------------------------------------------------------------

    def consumer_groups(self) -> list[dict]:
        return [vars(g) for g in self.admin.group_list()]

    def describe_group(self, group: str) -> dict:
        """The shape of `tidemq group describe -o json`."""
        d: GroupDescription = self.admin.group_describe(group)
        return d.to_json()

    def reset_offsets(self, group: str, topic: str, timestamp_ms: int) -> list[dict]:
        return [vars(e) for e in self.admin.reset_group_offsets(group, topic, timestamp_ms)]

    def delete_offsets(self, group: str, topic: str) -> dict:
        """As `tidemq group delete-offsets -o json` (group "": every group's): the brokers
        and groups whose committed offsets of `topic` were dropped."""
        dropped = self.admin.delete_group_offsets(topic, group)
        return {"group": group, "topic": topic, "brokers": sorted(dropped),
                "groups": sorted({g for groups in dropped.values() for g in groups})}

    def offsets_at(self, topic: str, timestamp_ms: int) -> list[dict]:
        """Per queue, the first offset stored at or after `timestamp_ms`."""
        return [{"broker_name": e.broker_name, "queue_id": e.queue_id, "offset": e.offset}
                for e in self.admin.offset_for_timestamp(topic, timestamp_ms)]

    # -- messages ------------------------------------------------------------------------

    def view_message(self, msg_id: str) -> MessageExt:
        return self.admin.view_message(msg_id)

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int,
                     max_results: int) -> list[MessageExt]:
        return self.admin.query_by_key(topic, key, begin_ms, end_ms, max_results)

    def query_by_time(self, topic: str, begin_ms: int, end_ms: int,
                      max_results: int) -> list[MessageExt]:
        """Up to `max_results` messages stored in [begin_ms, end_ms) (end 0 = now), oldest
        first; at most `max_results` are read from each queue."""
        found: list[MessageExt] = []
        for entry in self.admin.offset_for_timestamp(topic, begin_ms):
            mq = MessageQueue(topic, entry.broker_name, entry.queue_id)
            result = self.consumer.pull(mq, entry.offset, max_results)
            found += [m for m in result.messages
                      if m.store_timestamp >= begin_ms
                      and (not end_ms or m.store_timestamp < end_ms)]
        found.sort(key=lambda m: (m.store_timestamp, m.broker_name, m.queue_id, m.queue_offset))
        return found[:max_results]

    def close(self) -> None:
        self.admin.close()

"""Stateful property test: any sequence of register/unregister/expire keeps the tables consistent."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tidemq.common.errors import PreconditionFailed, TopicNotExist
from tidemq.nameserver.registry import DataVersion, Registration, RouteRegistry, TopicConfig

ADDRS = [f"10.0.0.{i}:10911" for i in range(1, 6)]
NAMES = ["broker-a", "broker-b", "broker-c"]
CLUSTERS = ["c1", "c2"]
TOPICS = ["t1", "t2", "t3", "t4"]


class RegistryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.registry = RouteRegistry(lambda: self.now)

    @rule(addr=st.sampled_from(ADDRS), name=st.sampled_from(NAMES),
          cluster=st.sampled_from(CLUSTERS), broker_id=st.integers(0, 2),
          version=st.integers(0, 3), topics=st.sets(st.sampled_from(TOPICS)))
    def register(self, addr, name, cluster, broker_id, version, topics):
        configs = tuple(TopicConfig(t, 4, 4) for t in sorted(topics))
        previous = self.registry.broker_live_table.get(addr)
        # Routes follow a master's registration only when its data version changed
        # (docs/routing.md; a broker bumps it with every topic change), or the address is new to this identity.
        publishes = previous is None or (previous.cluster, previous.broker_name,
                                         previous.broker_id, previous.data_version) != (
            cluster, name, broker_id, DataVersion(0, version))
        answer = self.registry.register(
            Registration(cluster, name, broker_id, addr, "", DataVersion(0, version), configs)
        )
        live = self.registry.broker_live_table[addr]
        assert (live.broker_name, live.broker_id, live.last_update_ms) == (name, broker_id, self.now)
        if broker_id == 0:
            assert answer.master_addr == ""
            if publishes:
                for topic in topics:
                    assert name in self.registry.topic_queue_table[topic]
        else:
            assert answer.master_addr == self.registry.broker_addr_table[name].broker_addrs.get(0, "")

    @rule(replica=st.integers(0, 2), master=st.booleans(), epoch=st.integers(1, 4),
          version=st.integers(0, 3))
    def register_replica(self, replica, master, epoch, version):
        """A replica of group broker-r (its own address) registering a role: id 0 while
        master, replica + 1 while slave; a master older than the registered one is refused."""
        addr = f"10.9.0.{replica}:10911"
        group = self.registry.broker_addr_table.get("broker-r")
        holder = group.broker_addrs.get(0) if group else None
        holder_epoch = self.registry.broker_live_table[holder].epoch if holder else 0
        registration = Registration("c1", "broker-r", 0 if master else replica + 1, addr, "",
                                    DataVersion(0, version), (TopicConfig("t1", 4, 4),),
                                    replica_id=replica, role="MASTER" if master else "SLAVE",
                                    epoch=epoch)
        try:
            self.registry.register(registration)
        except PreconditionFailed as exc:
            assert exc.code == "STALE_EPOCH"
            assert master and holder not in (None, addr) and holder_epoch > epoch
            return
        assert not (master and holder not in (None, addr) and holder_epoch > epoch)
        live = self.registry.broker_live_table[addr]
        assert (live.replica_id, live.epoch) == (replica, epoch)
        if master:
            assert self.registry.broker_addr_table["broker-r"].broker_addrs[0] == addr

    @rule(addr=st.sampled_from(ADDRS))
    def unregister(self, addr):
        live = self.registry.broker_live_table.get(addr)
        if live is None:
            assert not self.registry.unregister("c1", "broker-a", 0, addr)
            return
        assert self.registry.unregister(live.cluster, live.broker_name, live.broker_id, addr)
        assert addr not in self.registry.broker_live_table

    @rule(step=st.integers(0, 100_000))
    def tick_and_expire(self, step):
        self.now += step
        removed = self.registry.expire_silent(60_000)
        for addr in removed:
            assert addr not in self.registry.broker_live_table
        for live in self.registry.broker_live_table.values():
            assert self.now - live.last_update_ms <= 60_000

    @invariant()
    def tables_are_consistent(self):
        reg = self.registry
        addrs_in_brokers = {
            addr for bd in reg.broker_addr_table.values() for addr in bd.broker_addrs.values()
        }
        assert addrs_in_brokers == set(reg.broker_live_table)
        for addr, live in reg.broker_live_table.items():
            assert reg.broker_addr_table[live.broker_name].broker_addrs[live.broker_id] == addr
            assert reg.broker_addr_table[live.broker_name].cluster == live.cluster
        for name, bd in reg.broker_addr_table.items():
            assert bd.broker_addrs, "empty BrokerData must disappear"
            assert name in reg.cluster_addr_table[bd.cluster]
        for cluster, names in reg.cluster_addr_table.items():
            assert names, "empty cluster must disappear"
            for name in names:
                assert reg.broker_addr_table[name].cluster == cluster
        for topic, queues in reg.topic_queue_table.items():
            assert queues, "empty topic must disappear"
            assert set(queues) <= set(reg.broker_addr_table)
            route = reg.route(topic)
            assert {b.broker_name for b in route.broker_datas} == set(queues)
        for topic in TOPICS:
            if topic not in reg.topic_queue_table:
                try:
                    reg.route(topic)
                    raise AssertionError("route for a topic nobody serves")
                except TopicNotExist:
                    pass


TestRegistryMachine = RegistryMachine.TestCase
TestRegistryMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)

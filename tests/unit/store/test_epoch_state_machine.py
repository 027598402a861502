"""Hypothesis state machine over three real stores: appends on the master, partial
replication, elections of any replica holding everything every replica agrees on, and
returns of old masters through the real handshake (`handshake_reply`, `adopt`). After every
step no replica has lost a byte the whole group agreed on, and after every handshake the
slave's log is a byte prefix of its master's: replicas never diverge."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.broker.store.ha.client import adopt
from tidemq.broker.store.ha.records import complete_prefix
from tidemq.broker.store.ha.server import handshake_reply

from .helpers import encode_batch, open_store, small_config
from .test_replicated_append import log_bytes

REPLICAS = 3


class ReplicaGroup(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile
        from pathlib import Path
        self.root = Path(tempfile.mkdtemp(prefix="epochs-"))
        self.stores = [open_store(small_config(self.root / str(r))) for r in range(REPLICAS)]
        self.epoch, self.master = 1, 0
        self.stores[0].become_master(1)
        for slave in self.stores[1:]:
            slave.become_slave()
        self.following: set[int] = set()   # slaves that completed a handshake with the master
        self.agreed = b""                  # bytes every replica holds (the committed prefix)

    def teardown(self) -> None:
        import shutil
        for store in self.stores:
            store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(size=st.integers(1, 3000), count=st.integers(1, 3))
    def append(self, size: int, count: int) -> None:
        raw, _ = encode_batch("t", [bytes([65 + self.epoch % 26]) * size] * count)
        self.stores[self.master].append_batch("t", self.epoch % 2, raw, count)

    @rule(replica=st.integers(0, REPLICAS - 1))
    def handshake(self, replica: int) -> None:
        if replica == self.master:
            return
        slave, master = self.stores[replica], self.stores[self.master]
        reply = handshake_reply(master, True, {"replica_id": replica,
                                               "last_epoch": slave.epochs.last_epoch,
                                               "max_offset": slave.commitlog_max_offset(),
                                               "epochs": slave.epochs.entries})
        assert "error" not in reply, reply
        slave.commitlog.drop_replica_tail()
        adopt(slave, reply)
        end = slave.commitlog_max_offset()
        assert log_bytes(slave) == log_bytes(master)[:end], "the slave diverges from its master"
        self.following.add(replica)

    @precondition(lambda self: self.following)
    @rule(data=st.data())
    def replicate(self, data) -> None:
        replica = data.draw(st.sampled_from(sorted(self.following)))
        slave, master = self.stores[replica], self.stores[self.master]
        budget = data.draw(st.integers(1, 40_000))
        offset = slave.commitlog.replica_end
        while budget > 0 and offset < master.commitlog_max_offset():
            segment = master.commitlog.segment_for(offset)
            take = min(budget, master.commitlog_max_offset() - offset, segment.end_offset - offset)
            slave.append_replicated(offset, master.commitlog.read(offset, take))
            offset, budget = offset + take, budget - take

    @rule(data=st.data())
    def elect(self, data) -> None:
        """The controller elects a replica holding the agreed prefix (clean election)."""
        agreed = len(self.agreed)
        eligible = [r for r in range(REPLICAS) if self.stores[r].commitlog_max_offset() >= agreed]
        new = data.draw(st.sampled_from(eligible))
        self.epoch += 1
        self.stores[self.master].become_slave()
        self.stores[new].become_master(self.epoch)
        self.master, self.following = new, set()

    @invariant()
    def nothing_agreed_is_lost(self) -> None:
        """`agreed`: the longest run of whole records every replica holds byte for byte."""
        logs = [log_bytes(store) for store in self.stores]
        for log in logs:
            assert log[:len(self.agreed)] == self.agreed, "a replica lost an agreed byte"
        common = min(len(log) for log in logs)
        while common and len({log[:common] for log in logs}) > 1:
            common -= 1
        config = self.stores[0].config
        whole = complete_prefix(logs[0][:common], 0, config.segment_size, config.max_message_size)
        if whole > len(self.agreed):
            self.agreed = logs[0][:whole]


ReplicaGroup.TestCase.settings = settings(
    max_examples=20, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_replica_group = ReplicaGroup.TestCase

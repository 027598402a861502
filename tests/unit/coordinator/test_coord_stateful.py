"""Hypothesis state machine: random consumers join, sync, heartbeat, leave while the clock
jumps; after every step the coordinator's invariants must hold, and at the end every call
that was left waiting must have been answered (nothing hangs forever)."""

from __future__ import annotations

from concurrent.futures import Future

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tidemq.broker.coordinator import CoordinatorError, GroupState, JoinResult

from tests.unit.coordinator.coord_harness import GROUP, REBALANCE_MS, SESSION_MS, Harness

S = GroupState
# Written out again (not imported) so the test checks the implementation's table.
ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
} | {(s, S.DEAD) for s in S}

CONSUMERS = [f"c{i}" for i in range(5)]
PROTOCOL_CHOICES = [
    [("averagely", b"v1")],
    [("sticky", b"s"), ("averagely", b"v2")],
    [("sticky", b"s")],  # inconsistent with the averagely-only members
]
consumers = st.sampled_from(CONSUMERS)


class Consumer:
    """What a client knows: its member id, its last generation, its calls in flight."""

    def __init__(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.last_join: JoinResult | None = None
        self.join_call: Future | None = None
        self.sync_call: Future | None = None
        self.synced_generation = -1


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.clients = {name: Consumer() for name in CONSUMERS}
        self.calls: list[Future] = []
        self.max_generation = 0
        self.leader_of_generation: dict[int, str] = {}

    # ---------------------------------------------------------------- client actions

    @rule(name=consumers, protocols=st.sampled_from(PROTOCOL_CHOICES))
    def join(self, name, protocols):
        client = self.clients[name]
        call = self.h.coordinator.join_group(
            GROUP,
            client.member_id,
            protocols,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            client_id=name,
        )
        client.join_call = call
        self.calls.append(call)

    @rule(name=consumers, stale=st.booleans())
    def sync(self, name, stale):
        client = self.clients[name]
        if not client.member_id:
            return
        plan = None
        if client.last_join is not None and client.last_join.is_leader:
            plan = {m.member_id: m.member_id.encode() for m in client.last_join.members}
        generation = client.generation - 1 if stale else client.generation
        call = self.h.coordinator.sync_group(GROUP, client.member_id, generation, plan)
        client.sync_call = call
        self.calls.append(call)

    @rule(name=consumers)
    def heartbeat(self, name):
        client = self.clients[name]
        try:
            self.h.coordinator.heartbeat(GROUP, client.member_id, client.generation)
        except CoordinatorError as exc:
            assert exc.code in {
                "REBALANCE_IN_PROGRESS",
                "ILLEGAL_GENERATION",
                "UNKNOWN_MEMBER_ID",
            }, exc

    @rule(name=consumers)
    def leave(self, name):
        client = self.clients[name]
        try:
            self.h.coordinator.leave_group(GROUP, client.member_id)
            client.member_id = ""
        except CoordinatorError as exc:
            assert exc.code == "UNKNOWN_MEMBER_ID", exc

    @rule(ms=st.sampled_from([0, 1, 500, 2_999, 3_000, 9_999, 10_000, 20_000]))
    def advance(self, ms):
        self.h.advance(ms)

    @rule()
    def everyone_cooperates(self):
        """Let each client react to its answers like a real consumer would."""
        self.absorb_answers()
        for name, client in self.clients.items():
            if client.join_call is not None or client.sync_call is not None:
                continue
            if client.last_join is not None and client.synced_generation < client.generation:
                client.synced_generation = client.generation
                self.sync(name, stale=False)
            else:
                self.join(name, PROTOCOL_CHOICES[0])

    # ---------------------------------------------------------------- bookkeeping

    def absorb_answers(self) -> None:
        for client in self.clients.values():
            call = client.join_call
            if call is not None and call.done():
                client.join_call = None
                exc = call.exception()
                if exc is None:
                    result = call.result()
                    client.member_id, client.generation = result.member_id, result.generation_id
                    client.last_join = result
                    self.record_join(result)
                elif exc.code == "UNKNOWN_MEMBER_ID":
                    client.member_id = ""
            if client.sync_call is not None and client.sync_call.done():
                client.sync_call = None

    def record_join(self, result: JoinResult) -> None:
        known = self.leader_of_generation.setdefault(result.generation_id, result.leader_id)
        assert known == result.leader_id, "two leaders announced for one generation"
        assert bool(result.members) == result.is_leader  # the list goes to the leader only
        if result.is_leader:
            assert result.member_id in {m.member_id for m in result.members}

    # ---------------------------------------------------------------- invariants

    @invariant()
    def group_is_consistent(self):
        self.absorb_answers()
        group = self.h.coordinator._groups.get(GROUP)
        if group is None:
            return
        with group.lock:
            members = group.members
            if members:
                assert group.leader_id in members  # at most one leader, and it is a member
            else:
                assert group.leader_id is None
            assert group.generation_id >= self.max_generation  # monotonic
            self.max_generation = group.generation_id
            assert (group.pending_join is not None) == (group.state is S.PREPARING_REBALANCE)
            if group.state is S.STABLE:
                assert all(m.assignment is not None for m in members.values())
                assert not any(m.awaiting_join or m.awaiting_sync for m in members.values())
            if group.state is S.COMPLETING_REBALANCE:
                assert not any(m.awaiting_join for m in members.values())
            if group.state is S.EMPTY:
                assert not members

    @invariant()
    def transitions_follow_the_table(self):
        previous = S.EMPTY
        for _, old, new in self.h.transitions:
            assert old is previous and (old, new) in ALLOWED, (old, new)
            previous = new

    def teardown(self):
        # Silence from every client: within two rebalance+session periods every waiting call
        # is answered and the group drains to Empty.
        for _ in range(4):
            self.h.advance(REBALANCE_MS + SESSION_MS)
        assert all(call.done() for call in self.calls)
        assert self.h.state() in (S.EMPTY, S.DEAD)  # Dead: never created
        self.transitions_follow_the_table()


CoordinatorMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_coordinator_state_machine = CoordinatorMachine.TestCase

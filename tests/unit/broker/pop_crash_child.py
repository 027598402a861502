"""The process `test_pop_crash.py` SIGKILLs: seeded pop / ack / change-invisible / expiry /
compaction churn on a LocalBroker in `directory`, journalling each send and ack to
`directory/journal` only once it was answered (and each ack also before it is tried) (a line per event, flushed: a SIGKILL keeps what
reached the page cache). Snapshots are taken often and are several records long (4 KiB records),
so a kill lands inside compaction too."""

from __future__ import annotations

import contextlib
import random
import sys
from pathlib import Path

from tidemq.common import errors, record

from tests.unit.broker.test_pop_state_machine import GROUP, TOPIC, PopMachine


def churn(directory: Path, seed: int) -> None:
    rng = random.Random(seed)
    machine = PopMachine(directory)
    journal = open(directory / "journal", "a", buffering=1)  # noqa: SIM115 - held until killed
    n = 0
    while True:
        roll = rng.random()
        if roll < 0.3:
            bodies = [b"m%d" % (n + i) for i in range(rng.randint(1, 8))]
            n += len(bodies)
            raw = b"".join(record.encode_message(record.OutgoingMessage(TOPIC, b))[0]
                           for b in bodies)
            machine.run(machine.messaging.send(TOPIC, rng.randint(0, 1), raw, len(bodies)))
            journal.write("".join(f"S {b.decode()}\n" for b in bodies))
        elif roll < 0.7:
            popped = machine.run(machine.pop.pop(GROUP, TOPIC, rng.randint(1, 32),
                                                 rng.choice([1000, 5000, 60_000]), 0, ""))
            held = list(zip(record.iter_records(popped.records), popped.handles, strict=True))
            acks = [(r, h) for r, h in held if rng.random() < 0.8]
            if acks:  # "a": about to ack (a kill before the answer may or may not keep it)
                journal.write("".join(f"a {bytes(r.body).decode()}\n" for r, _ in acks))
                outcomes = machine.run(machine.pop.ack_many(GROUP, [h for _, h in acks]))
                journal.write("".join(f"A {bytes(r.body).decode()}\n"
                                      for (r, _), o in zip(acks, outcomes, strict=True)
                                      if o.error is None))
            for _, handle in held[:2]:
                if rng.random() < 0.2:
                    with contextlib.suppress(errors.TideMQError):  # acked above, or expired
                        machine.run(machine.pop.change_invisible(GROUP, handle, 1000))
        elif roll < 0.9:
            machine.clock.offset += rng.choice([0.5, 2, 6])
            machine.run(machine.pop.revive_due())
        else:
            machine.store.wait_dispatched(5)
            machine.run(machine.pop.compact())
            machine.offsets.persist()  # the broker's offset flush: restarts load the snapshot


if __name__ == "__main__":
    churn(Path(sys.argv[1]), int(sys.argv[2]))

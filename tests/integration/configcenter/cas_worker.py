"""One contender of the CAS acceptance test: `python cas_worker.py ADDR KEY COUNT` performs COUNT
compare-and-set increments of KEY and prints the revision of each successful write (JSON)."""

from __future__ import annotations

import json
import sys

from tidemq.configclient.client import ConfigClient


def main(addr: str, key: str, count: int) -> None:
    revisions, conflicts = [], 0
    with ConfigClient(addr, timeout=10.0) as client:
        while len(revisions) < count:
            current = client.get(key)
            value = int(current.text) if current else 0
            result = client.put(key, str(value + 1),
                                expected_revision=current.mod_revision if current else 0)
            if result.succeeded:
                revisions.append(result.revision)
            else:
                conflicts += 1
    print(json.dumps({"revisions": revisions, "conflicts": conflicts}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))

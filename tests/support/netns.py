"""Network namespaces for etcd members, so one can be partitioned from the others.

Only the standard library: the chaos fault table asks `PeerNetwork.unavailable()` whether its
partition row can run, and imports no process machinery.
"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): "
                           f"{done.stderr.strip()}")


class PeerNetwork:
    """Each member in a network namespace of its own, reached from the test's namespace and
    from each other member by a veth pair per pair of them (a full mesh: nothing is routed or
    forwarded, nothing in the host's namespace changes but the links to the members).

    Member i listens on 10.<block>.<i+1>.2 (its link to the host is 10.<block>.<i+1>.0/30);
    each peer reaches it over their own link (`p<j>` in member i's namespace), with a route
    to that one address. `cut(i)` drops everything on member i's peer links with an nftables
    table inside its namespace (silence, as a partition looks to TCP: no reset, no error);
    its clients still reach it. `heal(i)` deletes the table."""

    TABLE = "tidemq_partition"

    def __init__(self, size: int) -> None:
        self.size = size
        # the creating process's id (hex) first: remove_stale() finds what a killed run left
        self.tag = f"{os.getpid():x}-{random.randrange(16 ** 3):03x}"
        self.block = 0
        self.created: list[str] = []

    @staticmethod
    def unavailable() -> str:
        """Why members cannot be partitioned here ("" when they can)."""
        if os.geteuid() != 0:
            return "partitioning etcd members needs root (network namespaces and nftables)"
        missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
        if missing:
            return (f"partitioning etcd members needs {' and '.join(missing)} (Debian: "
                    "apt-get install iproute2 nftables; .ci/run installs them)")
        return ""

    def namespace(self, index: int) -> str:
        return f"tidemq-{self.tag}-m{index + 1}"

    def host(self, index: int) -> str:
        return f"10.{self.block}.{index + 1}.2"

    @staticmethod
    def remove_stale() -> None:
        """Delete the namespaces (and with them their links) of test runs that were killed
        before they could: named tidemq-<pid>-..., whose process no longer runs."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                timeout=30).stdout
        for line in listed.splitlines():
            name = line.split(" ", 1)[0]
            parts = name.split("-")
            if len(parts) != 4 or parts[0] != "tidemq":
                continue
            try:
                os.kill(int(parts[1], 16), 0)
            except ProcessLookupError:
                subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
            except (ValueError, PermissionError):
                continue

    def create(self) -> None:
        # under a lock from the look at the host's addresses to the last link: two test
        # processes creating at once would otherwise both see a block free and both take it
        with open(Path(tempfile.gettempdir()) / "tidemq-netns.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._create()

    def _create(self) -> None:
        self.remove_stale()
        used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True,
                              check=True).stdout
        free = [b for b in range(100, 250) if f" 10.{b}." not in used]
        if not free:
            raise RuntimeError("no free 10.x.0.0/16 block for the etcd members' links")
        self.block = random.choice(free)
        try:
            for i in range(self.size):
                ns, link = self.namespace(i), f"tq{self.tag.replace('-', '')}{i + 1}"
                _run("ip", "netns", "add", ns)
                self.created.append(ns)
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                _run("ip", "link", "add", link, "type", "veth", "peer", "name", "c0",
                     "netns", ns)
                _run("ip", "addr", "add", f"10.{self.block}.{i + 1}.1/30", "dev", link)
                _run("ip", "link", "set", link, "up")
                _run("ip", "-n", ns, "addr", "add", f"{self.host(i)}/30", "dev", "c0")
                _run("ip", "-n", ns, "link", "set", "c0", "up")
            for i in range(self.size):
                for j in range(i + 1, self.size):
                    a, b = self.namespace(i), self.namespace(j)
                    _run("ip", "-n", a, "link", "add", f"p{j + 1}", "type", "veth", "peer",
                         "name", f"p{i + 1}", "netns", b)
                    for ns, there, to in ((a, j, i), (b, i, j)):
                        _run("ip", "-n", ns, "link", "set", f"p{there + 1}", "up")
                        _run("ip", "-n", ns, "route", "add", f"{self.host(there)}/32", "dev",
                             f"p{there + 1}", "src", self.host(to))
        except BaseException:
            self.destroy()
            raise

    def wrap(self, index: int, command: list[str]) -> list[str]:
        """`command` run in member `index`'s namespace (`ip netns exec` execs it: the
        process id is the member's own)."""
        return ["ip", "netns", "exec", self.namespace(index), *command]

    def cut(self, index: int) -> None:
        rules = (f"table inet {self.TABLE} {{\n"
                 "  chain in { type filter hook input priority -300; iifname \"p*\" drop; }\n"
                 "  chain out { type filter hook output priority -300; oifname \"p*\" drop; }\n"
                 "}\n")
        done = subprocess.run(["ip", "netns", "exec", self.namespace(index), "nft", "-f", "-"],
                              input=rules, text=True, capture_output=True, timeout=30)
        if done.returncode:
            raise RuntimeError(f"nft in {self.namespace(index)} refused the partition "
                               f"({done.returncode}): {done.stderr.strip()}")

    def heal(self, index: int) -> None:
        _run("ip", "netns", "exec", self.namespace(index), "nft", "delete", "table", "inet",
             self.TABLE)

    def destroy(self) -> None:
        """Delete the namespaces (their links go with them, the host's ends too)."""
        for ns in self.created:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=30)
        self.created = []

"""Real etcd clusters for tests: one member or several, on 127.0.0.1 with ephemeral ports and
their own data directories, started, stopped, frozen and killed by their process ids.

`EtcdCluster(..., network=True)` runs each member in a network namespace of its own
(tests/support/netns.py; root, `ip` and `nft` needed: `PeerNetwork.unavailable()` says why
not), so one member can be cut from the others — a partition, silence on the wire — while
clients still reach every member.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from tidemq.etcd import rpc_pb2 as etcd
from tidemq.etcd import rpc_pb2_grpc as etcd_grpc

from tests.support.netns import PeerNetwork
from tests.support.processes import free_port, wait_until

ETCD = os.environ.get("TIDEMQ_TEST_ETCD", "etcd")
_counter = itertools.count(1)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class EtcdMember:
    name: str
    data_dir: Path
    client_port: int = 0
    peer_port: int = 0
    proc: subprocess.Popen | None = None
    extra_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    wrap: list[str] = field(default_factory=list)   # e.g. ip netns exec NS

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    @property
    def log(self) -> Path:
        return self.data_dir.parent / f"{self.name}.log"

    def command(self, initial_cluster: str, token: str, state: str) -> list[str]:
        client = f"http://{self.addr}"
        return [*self.wrap, ETCD, "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", self.peer_url,
                "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", initial_cluster, "--initial-cluster-token", token,
                "--initial-cluster-state", state, "--logger", "zap",
                "--log-outputs", "stderr", *self.extra_args]

    def launch(self, initial_cluster: str, token: str, state: str = "new") -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.command(initial_cluster, token, state),
                                         stdout=out, stderr=subprocess.STDOUT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self, timeout: float = 0.5) -> etcd.StatusResponse | None:
        with grpc.insecure_channel(self.addr) as channel:
            try:
                return etcd_grpc.MaintenanceStub(channel).Status(etcd.StatusRequest(),
                                                                 timeout=timeout)
            except grpc.RpcError:
                return None

    def signal(self, signum: int) -> None:
        if self.running:
            os.kill(self.proc.pid, signum)

    def kill(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(15)

    def stop(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


class EtcdCluster:
    """`size` members; `endpoints` is what a config center's --etcd-endpoints takes."""

    def __init__(self, root: Path, size: int = 1, token: str = "", *,
                 network: bool = False) -> None:
        index = next(_counter)
        self.root = Path(root) / f"etcd-{index}"
        self.token = token or f"tidemq-test-{os.getpid()}-{index}"
        self.members = [EtcdMember(f"m{i + 1}", self.root / f"m{i + 1}.data")
                        for i in range(size)]
        self.network: PeerNetwork | None = None
        if network:
            reason = PeerNetwork.unavailable()
            if reason:
                raise RuntimeError(reason)
            self.network = PeerNetwork(size)
            self.network.create()
            for i, member in enumerate(self.members):
                member.host = self.network.host(i)
                member.wrap = self.network.wrap(i, [])

    def partition(self, member: EtcdMember) -> None:
        """Cut `member` from every other member (both ways); clients still reach it."""
        assert self.network is not None, "EtcdCluster(network=True) partitions members"
        self.network.cut(self.members.index(member))

    def heal(self, member: EtcdMember) -> None:
        assert self.network is not None
        self.network.heal(self.members.index(member))

    @property
    def endpoints(self) -> str:
        return ",".join(m.addr for m in self.members)

    @property
    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        for attempt in range(4):
            for member in self.members:
                member.client_port, member.peer_port = free_port(), free_port()
            for member in self.members:
                member.launch(self.initial_cluster, self.token)
            try:
                self.wait_leader(timeout)
                return self
            except (TimeoutError, RuntimeError):
                logs = "\n".join(_tail(m.log, 8) for m in self.members)
                for member in self.members:
                    member.kill()
                if "address already in use" not in logs or attempt == 3:
                    raise RuntimeError(f"etcd would not start:\n{logs}") from None
                for member in self.members:  # a port was taken: start again, elsewhere
                    with contextlib.suppress(FileNotFoundError):
                        shutil.rmtree(member.data_dir, ignore_errors=True)
                        member.log.unlink()
        raise AssertionError("unreachable")

    def restart_member(self, member: EtcdMember) -> None:
        """Start a stopped member again with its data and ports (it rejoins the cluster)."""
        member.launch(self.initial_cluster, self.token, state="existing")

    def leader(self, timeout: float = 0.5) -> EtcdMember | None:
        statuses = {m.name: m.status(timeout) for m in self.members if m.running}
        ids = {s.leader for s in statuses.values() if s is not None and s.leader}
        for member in self.members:
            status = statuses.get(member.name)
            if status is not None and status.header.member_id in ids:
                return member
        return None

    def wait_leader(self, timeout: float = 30.0) -> EtcdMember:
        def exited() -> None:
            for member in self.members:
                if member.proc is not None and member.proc.poll() is not None \
                        and member.proc.returncode not in (-9, -15):
                    raise RuntimeError(f"etcd member {member.name} exited with "
                                       f"{member.proc.returncode}:\n{_tail(member.log)}")

        def found() -> EtcdMember | None:
            exited()
            return self.leader()

        return wait_until(found, timeout, message=f"an etcd leader among {self.endpoints}")

    def followers(self) -> list[EtcdMember]:
        leader = self.wait_leader()
        return [m for m in self.members if m is not leader]

    def compact(self, revision: int) -> None:
        with grpc.insecure_channel(self.wait_leader().addr) as channel:
            etcd_grpc.KVStub(channel).Compact(etcd.CompactionRequest(revision=revision,
                                                                     physical=True), timeout=5)

    def kill(self) -> None:
        for member in self.members:
            member.kill()
        if self.network is not None:
            self.network.destroy()


def start_etcd(tmp_path: Path, size: int = 1, *, network: bool = False) -> EtcdCluster:
    cluster = EtcdCluster(Path(tmp_path), size, network=network)
    try:
        return cluster.start()
    except BaseException:
        cluster.kill()
        raise


@contextlib.contextmanager
def etcd_cluster(tmp_path: Path, size: int = 1) -> Iterator[EtcdCluster]:
    cluster = start_etcd(tmp_path, size)
    try:
        yield cluster
    finally:
        cluster.kill()

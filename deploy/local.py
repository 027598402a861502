"""`make up / down / status / logs`: the topology as supervised local processes.

supervisord (from the dev dependencies) owns every process and restarts any that dies
(autorestart). `up` starts the services tier by tier in dependency order and waits for each
tier to be healthy before the next, so a broken service is reported by name with its log.

    python -m deploy.local up [--port-offset N] [--run-dir D] [--data-dir D]
    python -m deploy.local down | status | logs [SERVICE | GROUP]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path

from supervisor.xmlrpc import Faults, SupervisorTransport

from deploy import analytics, etcd_cluster, observability
from deploy import ports as ports_mod
from deploy.entry_points import entry_point_urls
from deploy.health import Unhealthy, probe, wait_healthy
from deploy.observability import render_prometheus
from deploy.pidfiles import await_exit, recorded_pid
from deploy.render import render_supervisor
from deploy.secure_store import StoreSecurity, StoreSecurityError, bootstrap_etcd_auth
from deploy.topology import (
    REPO_ROOT,
    Placement,
    Service,
    Topology,
    enabled_profiles,
    env_overrides,
    load,
    published_urls,
    replica_name,
)

DEFAULT_DATA_DIR = REPO_ROOT / ".data"
BIN_DIR = Path(sys.executable).parent


class DeployError(RuntimeError):
    pass


# Debian package that provides each engine the topology runs
ENGINE_PACKAGES = {"etcd": "etcd-server", "redis-server": "redis-server"}


def ensure_program(program: str) -> str:
    """Path of etcd or redis-server, installing Debian's package (etcd-server, redis-server)
    when missing and we are root."""
    found = shutil.which(program)
    if found:
        return found
    package = ENGINE_PACKAGES[program]
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"{program} is missing: installing Debian's {package} package")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", package], check=True, env=env)
        found = shutil.which(program)
        if found:
            return found
    raise DeployError(
        f"{program} is not installed. Install it (Debian/Ubuntu: `sudo apt-get install "
        f"{package}`, macOS: `brew install {'etcd' if program == 'etcd' else 'redis'}`) and run "
        "`make up` again."
    )


def _profiles() -> tuple[str, ...]:
    """TIDEMQ_OBSERVABILITY=1 / TIDEMQ_ANALYTICS=1 (`make up OBSERVABILITY=1 ANALYTICS=1`) add
    the observability / analytics profiles."""
    return enabled_profiles(os.environ)


def local_topology(replicas: int | None = None, profiles: tuple[str, ...] = (), *,
                   etcd: str | None = None) -> tuple[Topology, dict[str, str]]:
    """The services `make up` runs, and those of the enabled profiles it cannot run here
    (program not installed) with the reason."""
    topology = load(replicas=replicas, etcd=etcd, profiles=profiles)
    skipped = {**observability.local_unavailable(topology),
               **analytics.local_unavailable(topology)}
    return topology.select(profiles, drop=tuple(skipped)), skipped


@dataclasses.dataclass
class LocalDeployment:
    """One supervisord-run copy of the topology; tests make their own with other dirs/ports."""

    data_dir: Path = DEFAULT_DATA_DIR
    port_offset: int = 0
    topology: Topology = dataclasses.field(
        default_factory=lambda: load(**env_overrides(os.environ)))
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> why not run
    # the secure profile's stores (deploy/secure_store.py); None: etcd and Redis in plaintext
    security: StoreSecurity | None = None

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    @property
    def config_file(self) -> Path:
        return self.run_dir / "supervisord.conf"

    @property
    def prometheus_file(self) -> Path:
        """Scrape configuration for these processes: `prometheus --config.file=<this>`."""
        return self.run_dir / "prometheus.yml"

    @property
    def placement(self) -> Placement:
        return Placement(port_offset=self.port_offset)

    def log_file(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    # --- supervisord -------------------------------------------------------------------

    def supervisorctl(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN_DIR / "supervisorctl"), "-c", str(self.config_file), *args],
            capture_output=True,
            text=True,
            check=check,
        )

    def supervisord_pid(self) -> int | None:
        """The running supervisord's PID; None for a stale pid file (pidfiles.py)."""
        return recorded_pid(self.run_dir / "supervisord.pid", "supervisord")

    def adopt_legacy_data_dirs(self, progress=print) -> None:
        """Before issue #41 a group's replica 0 ran as the group's own name (`broker-a`) and
        kept its store in `<data>/broker-a`; it is `broker-a-0` now. An old directory is
        renamed to the replica's, so that replica starts on its own store (only while
        supervisord is down: nothing then runs on it)."""
        for service in self.topology.services.values():
            legacy = self.data_dir / service.group
            current = self.data_dir / service.name
            if (service.group != service.name and service.name == replica_name(service.group, 0)
                    and legacy.is_dir() and not current.exists()):
                legacy.rename(current)
                progress(f"moved {legacy} to {current} (replica 0 of {service.group} is "
                         f"{service.name} now)")

    def _write_config(self, programs: dict[str, str]) -> None:
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        for service in self.topology.services.values():
            # etcd wants its data directory to itself (0700, else it warns at every start)
            (self.data_dir / service.name).mkdir(mode=0o700 if service.is_etcd else 0o777,
                                                 parents=True, exist_ok=True)
        self.config_file.write_text(
            render_supervisor(
                self.topology,
                self.placement,
                run_dir=self.run_dir,
                data_dir=self.data_dir,
                redis_server=programs.get("redis-server", "redis-server"),
                etcd=programs.get("etcd", "etcd"),
                prometheus=shutil.which("prometheus") or "prometheus",
                security=self.security,
            )
        )
        self.prometheus_file.write_text(render_prometheus(self.topology, self.placement))
        if self.topology.tracing in self.topology.services:  # where `tidemq` sends spans
            (self.run_dir / "otlp-endpoint").write_text(
                self.placement.addr(self.topology.services[self.topology.tracing]) + "\n")

    def start_supervisord(self, programs: dict[str, str]) -> None:
        """`programs`: the etcd and redis-server executables."""
        if self.supervisord_pid():
            self._write_config(programs)
            self.supervisorctl("update")  # pick up topology changes for a running supervisor
            return
        self._write_config(programs)
        subprocess.run([str(BIN_DIR / "supervisord"), "-c", str(self.config_file)], check=True)
        deadline = time.monotonic() + 20
        while self.supervisorctl("pid").returncode != 0:
            if time.monotonic() > deadline:
                raise DeployError(f"supervisord did not start; see {self.run_dir}/supervisord.log")
            time.sleep(0.1)

    def start(self, names: list[str]) -> None:
        """Start these programs together (`supervisorctl start` starts one at a time and waits
        out each one's startsecs); `up` then waits for them to be healthy and RUNNING."""
        transport = SupervisorTransport(serverurl=f"unix://{self.run_dir / 'supervisor.sock'}")
        with xmlrpc.client.ServerProxy("http://127.0.0.1", transport) as supervisord:
            for name in names:
                try:
                    supervisord.supervisor.startProcess(name, False)
                except xmlrpc.client.Fault as fault:
                    if fault.faultCode != Faults.ALREADY_STARTED:
                        raise DeployError(f"supervisord cannot start {name}: "
                                          f"{fault.faultString}") from None

    def state(self, name: str) -> tuple[str, int | None]:
        """(supervisor state such as RUNNING/FATAL/BACKOFF, pid or None)."""
        out = self.supervisorctl("status", name).stdout.split()
        state = out[1] if len(out) > 1 else "UNKNOWN"
        pid = int(out[3].rstrip(",")) if state == "RUNNING" and len(out) > 3 else None
        return state, pid

    def pid(self, name: str) -> int | None:
        return self.state(name)[1]

    # --- lifecycle ---------------------------------------------------------------------

    def busy_ports(self) -> list[str]:
        """Ports of the topology some other program already listens on."""
        return [
            f"{place_port} ({service.name} {port_name})"
            for service in self.topology.services.values()
            for port_name in service.ports
            if not ports_mod.port_free(place_port := self.placement.port(service, port_name))
        ]

    def up(self, *, timeout: float = 90.0, progress=print) -> None:
        services = self.topology.services.values()
        programs = {program: ensure_program(program) for program, needed in (
            ("etcd", any(s.is_etcd for s in services)),
            ("redis-server", any(s.is_redis for s in services))) if needed}
        if self.supervisord_pid() is None and (busy := self.busy_ports()):
            # otherwise a foreign listener would answer our health probes
            raise DeployError(
                f"ports already in use: {', '.join(busy)}. Stop what holds them (another "
                "`make up`? `make compose-down`?) or use `python -m deploy.local up --port-offset N`"
            )
        self.check_store_profile()
        if self.supervisord_pid() is None:
            self.adopt_legacy_data_dirs(progress)
        self.start_supervisord(programs)
        progress(f"supervisord running (config {self.config_file})")
        for tier in self.topology.start_order():
            names = [s.name for s in tier]
            progress(f"starting {' '.join(names)}")
            self.start(names)
            wait_healthy(
                tier,
                self.placement,
                timeout=timeout,
                progress=progress,
                still_alive=self._gave_up,
            )
            self._wait_running(tier, timeout)
            if any(s.is_etcd for s in tier):
                self._store_ready(progress)

    # --- the store's profile -----------------------------------------------------------

    @property
    def store_profile_file(self) -> Path:
        """Whether the etcd data directories were made plaintext or secure: peers of one
        cannot talk to the other's URLs, so a switch needs fresh data directories."""
        return self.data_dir / "etcd-profile"

    @property
    def store_profile(self) -> str:
        return "secure" if self.security else "plain"

    def check_store_profile(self) -> None:
        members = [self.data_dir / s.name / "member" for s in self.topology.etcd_members()]
        if not any(path.exists() for path in members):
            self.store_profile_file.unlink(missing_ok=True)
            return
        made = (self.store_profile_file.read_text().strip()
                if self.store_profile_file.exists() else "plain")
        if made != self.store_profile:
            raise DeployError(
                f"the etcd data under {self.data_dir} was made by the {made} profile "
                f"({'make up-secure' if made == 'secure' else 'make up'}); etcd's members "
                "keep their peer URLs (https or http) in it. Run that profile again, or "
                f"start the store afresh: `make down; rm -rf {self.data_dir}/etcd-*`")

    def _store_ready(self, progress) -> None:
        """Once the members serve: the secure profile turns etcd's authentication on."""
        self.store_profile_file.write_text(self.store_profile + "\n")
        if self.security is None:
            return
        endpoints = [f"127.0.0.1:{self.placement.port(m, 'client')}"
                     for m in self.topology.etcd_members()]
        try:
            progress(f"  {bootstrap_etcd_auth(endpoints, self.security)}")
        except StoreSecurityError as exc:
            raise DeployError(str(exc)) from None

    def _wait_running(self, tier: list[Service], timeout: float) -> None:
        """Healthy is not yet RUNNING: supervisord says so once a process outlived startsecs."""
        deadline = time.monotonic() + timeout
        for service in tier:
            while (state := self.state(service.name)[0]) != "RUNNING":
                if (reason := self._gave_up(service)) or time.monotonic() > deadline:
                    raise Unhealthy(service, reason or f"supervisor reports {state}")
                time.sleep(0.1)  # pacing between status queries

    def _gave_up(self, service: Service) -> str | None:
        state, _ = self.state(service.name)
        return f"supervisor reports {state}" if state in ("FATAL", "STOPPED", "EXITED") else None

    def down(self, *, timeout: float = 60.0) -> bool:
        """supervisorctl shutdown (SIGTERM to each process), then wait for supervisord to exit."""
        pid = self.supervisord_pid()
        if pid is None:
            return False
        self.supervisorctl("shutdown")
        await_exit(pid, "supervisord", timeout)
        (self.run_dir / "otlp-endpoint").unlink(missing_ok=True)
        return True

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.log_file(name)
        if not path.exists():
            return f"(no log at {path})"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def urls(self) -> list[str]:
        return published_urls(self.topology, self.placement)


def free_port_offset(topology: Topology) -> int:
    """A port offset under which every port of the topology is free on 127.0.0.1 now and
    claimed by no other live process (tests use it to run a second deployment beside `make
    up`): the shifted ports lie between ports.FLOOR and the kernel's ephemeral range
    (deploy/ports.py says why)."""
    ports = [p for s in topology.services.values() for p in s.ports.values()]
    low, high = ports_mod.FLOOR - min(ports), ports_mod.ephemeral_low() - max(ports)
    if high <= low:
        raise DeployError(f"the topology's ports ({min(ports)}..{max(ports)}) do not fit "
                          f"between {ports_mod.FLOOR} and the ephemeral range")
    def shifted() -> set[int]:
        offset = random.randrange(low, high)
        return {p + offset for p in ports}

    claimed = ports_mod.claim(shifted, attempts=50)
    if claimed is None:
        raise DeployError("found no port offset with every port free")
    return min(claimed) - min(ports)


def _cmd_up(deployment: LocalDeployment) -> int:
    try:
        deployment.up()
    except Unhealthy as exc:
        print(f"\nFAILED: {exc}\n--- last lines of {deployment.log_file(exc.service.name)}:")
        print(deployment.tail(exc.service.name))
        print("\n(the other services are still running: `make status`, `make down`)")
        return 1
    except DeployError as exc:
        print(f"FAILED: {exc}")
        return 1
    print("\nTideMQ is up:")
    print("\n".join([*deployment.urls(), *entry_point_urls(deployment.topology,
                                                            deployment.placement)]))
    print(f"  logs: {deployment.run_dir / 'logs'}   data: {deployment.data_dir}")
    print(f"  Prometheus scrape config: {deployment.prometheus_file}")
    for name, reason in deployment.skipped.items():
        print(f"  not started: {name}: {reason}")
    if analytics.PROFILE not in {s.profile for s in deployment.topology.services.values()}:
        print("  Spark standalone cluster: `make up ANALYTICS=1` (spark://127.0.0.1:7077, "
              "UI http://127.0.0.1:8090)")
    return 0


def _cmd_status(deployment: LocalDeployment) -> int:
    if deployment.supervisord_pid() is None:
        print("not running (start it with `make up`)")
        return 1
    print(deployment.supervisorctl("status").stdout.rstrip())
    healthy = True
    for service in deployment.topology.services.values():
        ok, reason = probe(service, deployment.placement)
        healthy &= ok
        print(f"{'healthy  ' if ok else 'UNHEALTHY'} {service.name:<16} {reason}")
    credentials = deployment.security.operator_credentials() if deployment.security else None
    print("\n".join(etcd_cluster.status_lines(deployment.topology, deployment.placement,
                                              credentials=credentials)))
    print("\n".join(config_center_lines(deployment.topology, deployment.placement)))
    from tidemq.common.channel.metrics import wire_share_line  # tidemq_rpc_calls_total

    print(wire_share_line({s.name: f"http://{deployment.placement.addr(s, 'metrics')}/metrics"
                           for s in deployment.topology.services.values()
                           if s.name.startswith("gateway") and "metrics" in s.ports}))
    print("\n".join(entry_point_urls(deployment.topology, deployment.placement)))
    return 0 if healthy else 1


def config_center_lines(topology: Topology, placement: Placement,
                        timeout: float = 2.0) -> list[str]:
    """Each config center as `make status` shows it: reachable or not, its version, and the
    etcd endpoints it stores in (ConfigService.DescribeStore, asked of each on its own); then
    each etcd member that does not serve, and why (down, or of another cluster)."""
    from tidemq.configclient.client import ConfigClient

    centers = topology.members("config-center")
    if not centers:
        return []
    names = {placement.addr(s): s.name for s in centers}
    lines = ["Config centers:"]
    with ConfigClient(",".join(names), timeout=timeout) as config:
        instances = config.describe_each()
    for instance in instances:
        where = f"  {names.get(instance.address, instance.address):<16} {instance.address:<16}"
        if instance.store is None:
            state = "DOWN     " if not instance.reachable else "up       "
            lines.append(f"{where} {state} {instance.error}")
        else:
            store = instance.store
            lines.append(f"{where} up        version {store.version or '?'}, store "
                         f"{store.target or '?'}, leader {store.leader or 'none'}, "
                         f"revision {store.revision}")
    described = next((i for i in instances if i.store is not None), None)
    if described is not None:  # the members that do not serve, as the first instance sees them
        for member in described.store.members:
            if not member.reachable:
                lines.append(f"  etcd member {member.name or '?'} {member.endpoint} not "
                             f"serving (as {described.address} sees it): {member.error}")
    return lines


def log_names(topology: Topology, service: str | None) -> list[str] | None:
    """The services `make logs` tails: every one, one (`SERVICE=broker-a-1`), or every
    instance of an expanded entry (`SERVICE=broker-a`: its replicas broker-a-0..2;
    `SERVICE=etcd`: every member); None for a name that is neither."""
    if not service:
        return list(topology.services)
    return topology.named(service) or None


def _cmd_logs(deployment: LocalDeployment, service: str | None) -> int:
    names = log_names(deployment.topology, service)
    if names is None:
        groups = sorted({s.group for s in deployment.topology.services.values()
                         if s.group != s.name})
        print(f"unknown service {service!r}; known: {', '.join(deployment.topology.services)} "
              f"(and the groups {', '.join(groups)})")
        return 2
    files = [str(deployment.log_file(n)) for n in names if deployment.log_file(n).exists()]
    if not files:
        print(f"no logs under {deployment.run_dir / 'logs'} yet")
        return 1
    os.execvp("tail", ["tail", "-n", "50", "-F", *files])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.local", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "logs"])
    parser.add_argument("service", nargs="?", help="for logs: one service, or a group's "
                        "instances (broker-a: broker-a-0..2); default: all")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--port-offset", type=int, default=0)
    args = parser.parse_args(argv)
    overrides = env_overrides(os.environ)
    topology, skipped = local_topology(overrides["replicas"], _profiles(),
                                       etcd=overrides["etcd"])
    deployment = LocalDeployment(data_dir=args.data_dir.resolve(), port_offset=args.port_offset,
                                 topology=topology, skipped=skipped,
                                 security=StoreSecurity.from_env(os.environ))
    if args.command == "up":
        return _cmd_up(deployment)
    if args.command == "down":
        print("stopped" if deployment.down() else "not running")
        return 0
    if args.command == "status":
        return _cmd_status(deployment)
    return _cmd_logs(deployment, args.service or os.environ.get("SERVICE") or None)


if __name__ == "__main__":
    sys.exit(main())

"""The deployment topology (deploy/topology.yaml) as plain objects, plus address resolution.

One description feeds both the supervisord config and docker-compose.yml, so the two
deployments cannot drift. A `Placement` says where services live: locally every service is on
127.0.0.1 with its ports shifted by an offset (so tests can run beside `make up`); under compose
each service is reached by its service name on its unshifted port.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY_FILE = REPO_ROOT / "deploy" / "topology.yaml"

_HEALTH_KINDS = ("grpc", "http", "redis")
_PROGRAMS = ("redis", "etcd", "prometheus", "grafana", "spark-master", "spark-worker",
             "spark-submit")
ALL_PROFILES = ("*",)
ETCD_MODES = ("cluster", "single")  # TIDEMQ_ETCD / `make up ETCD=single`
_PLACEHOLDER = re.compile(r"\{(addrs|addr|port|published):([a-z0-9-]+)(?::([a-z0-9-]+))?\}")
_COMPOSE_KEYS = ("ports", "publish", "args")


class TopologyError(ValueError):
    """The topology file is inconsistent (unknown dependency, port, image, cycle...)."""


@dataclasses.dataclass(frozen=True)
class Health:
    kind: str
    port: str
    path: str = "/healthz"


@dataclasses.dataclass(frozen=True)
class Image:
    name: str
    dockerfile_dir: str | None
    package: str | None
    members: tuple[str, ...]
    upstream: str | None = None  # a registry image used as is (not built here), e.g. Grafana
    apt: tuple[str, ...] = ()  # Debian packages installed in the image (Java for Spark)
    cmd: tuple[str, ...] = ()  # the image's CMD when no tidemq module runs in it


@dataclasses.dataclass(frozen=True)
class Service:
    name: str
    image: str
    module: str | None
    ports: dict[str, int]
    publish: tuple[str, ...]
    args: tuple[str, ...]
    depends_on: tuple[str, ...]
    health: Health
    stateful: bool
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    program: str | None = None  # not a tidemq module: redis, prometheus, grafana, spark-*
    profile: str | None = None  # compose profile (and `make up` switch) that enables it
    group: str = ""  # the topology entry it was expanded from (its own name if not expanded)
    # `compose:` what only the compose deployment adds: more ports, its own published ports,
    # more args (e.g. gateway-kafka's external listener); see under_compose
    compose_ports: dict[str, int] = dataclasses.field(default_factory=dict)
    compose_publish: tuple[str, ...] | None = None
    compose_args: tuple[str, ...] = ()

    def under_compose(self) -> Service:
        """The service as docker compose runs it: `compose:` merged in (ports added, publish
        replaced, args appended). Applying it twice changes nothing."""
        if not self.compose_ports and self.compose_publish is None and not self.compose_args:
            return self
        return dataclasses.replace(
            self, ports={**self.ports, **self.compose_ports},
            publish=self.publish if self.compose_publish is None else self.compose_publish,
            args=self.args + self.compose_args,
            compose_ports={}, compose_publish=None, compose_args=())

    @property
    def main_port(self) -> str:
        return next(iter(self.ports))

    @property
    def is_redis(self) -> bool:
        return self.program == "redis"

    @property
    def is_etcd(self) -> bool:
        """A member of the config center's etcd cluster."""
        return self.program == "etcd"

    def env_name(self, port_name: str) -> str:
        """Environment variable that overrides a published host port under compose."""
        stem = self.name.upper().replace("-", "_")
        suffix = "" if port_name == self.main_port else "_" + port_name.upper()
        return f"TIDEMQ_{stem}{suffix}_PORT"


@dataclasses.dataclass(frozen=True)
class Topology:
    images: dict[str, Image]
    services: dict[str, Service]
    tracing: str | None
    replication: Replication = dataclasses.field(default_factory=lambda: Replication())
    control_plane: ControlPlane = dataclasses.field(default_factory=lambda: ControlPlane())

    def select(self, profiles: tuple[str, ...] = (), *, drop: tuple[str, ...] = ()) -> Topology:
        """The services that run: those without a profile or with one of `profiles`, minus
        `drop` (e.g. a program not installed here)."""
        services = {name: s for name, s in self.services.items()
                    if (s.profile is None or s.profile in profiles) and name not in drop}
        return dataclasses.replace(self, services=services)

    def under_compose(self) -> Topology:
        """Every service as docker compose runs it (Service.under_compose)."""
        return dataclasses.replace(self, services={name: s.under_compose()
                                                   for name, s in self.services.items()})

    def profiles(self) -> list[str]:
        return sorted({s.profile for s in self.services.values() if s.profile})

    def members(self, group: str) -> list[Service]:
        """The services expanded from one topology entry (config-center-1, -2...)."""
        return [s for s in self.services.values() if s.group == group]

    def named(self, name: str) -> list[str]:
        """The services a name given on a command line means: that service (`broker-a-1`), or
        every instance of an expanded entry (`broker-a`: broker-a-0..2; `etcd`: every member);
        [] for neither."""
        if name in self.services:
            return [name]
        return [s.name for s in self.members(name)]

    def etcd_members(self) -> list[Service]:
        """The etcd cluster's members (etcd-1, etcd-2, ...), in order."""
        return [s for s in self.services.values() if s.is_etcd]

    def start_order(self) -> list[list[Service]]:
        """Services in tiers: every service's dependencies sit in an earlier tier."""
        placed: set[str] = set()
        tiers: list[list[Service]] = []
        remaining = dict(self.services)
        while remaining:
            tier = [s for s in remaining.values() if set(s.depends_on) <= placed]
            if not tier:
                raise TopologyError(f"dependency cycle among {sorted(remaining)}")
            tiers.append(tier)
            for service in tier:
                placed.add(service.name)
                del remaining[service.name]
        return tiers


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where services are reachable: local processes or compose containers."""

    compose: bool = False
    port_offset: int = 0
    port_overrides: dict[str, int] = dataclasses.field(default_factory=dict)

    def host(self, service: Service) -> str:
        return service.name if self.compose else "127.0.0.1"

    def port(self, service: Service, port_name: str) -> int:
        if port_name not in service.ports:
            raise TopologyError(f"service {service.name!r} has no port {port_name!r}")
        if self.compose:
            return service.ports[port_name]
        key = f"{service.name}.{port_name}"
        return self.port_overrides.get(key, service.ports[port_name] + self.port_offset)

    def addr(self, service: Service, port_name: str | None = None) -> str:
        return f"{self.host(service)}:{self.port(service, port_name or service.main_port)}"


def expand(text: str, service: Service, topology: Topology, placement: Placement) -> str:
    """Replace {addr:SVC[:PORT]}, {port:PORT} / {port:SVC:PORT}, {addrs:ENTRY[:PORT]} (every
    service expanded from one entry, comma-separated) and {published:PORT} (the host port one
    of the service's own ports is published on: under compose the variable that overrides it,
    `${TIDEMQ_<SERVICE>_<PORT>_PORT:-port}`, which compose substitutes; locally the port)."""

    def substitute(match: re.Match[str]) -> str:
        kind, first, second = match.groups()
        if kind == "published":
            if second is not None:
                raise TopologyError(f"{service.name}: {match.group(0)}: a port of its own only")
            port = placement.port(service, first)
            return f"${{{service.env_name(first)}:-{port}}}" if placement.compose else str(port)
        if kind == "port" and second is None:
            return str(placement.port(service, first))
        if kind == "addrs":
            if not (members := topology.members(first)):
                raise TopologyError(f"{service.name}: {match.group(0)} names no service")
            return ",".join(placement.addr(member, second) for member in members)
        target = topology.services.get(first)
        if target is None:
            raise TopologyError(f"{service.name}: {match.group(0)} names no service")
        if kind == "addr":
            return placement.addr(target, second)
        return str(placement.port(target, second or target.main_port))

    return _PLACEHOLDER.sub(substitute, text)


def _service(name: str, raw: dict, images: dict[str, Image]) -> Service:
    ports = {str(k): int(v) for k, v in (raw.get("ports") or {}).items()}
    if not ports:
        raise TopologyError(f"service {name!r} declares no ports")
    image = raw.get("image")
    if image not in images:
        raise TopologyError(f"service {name!r}: unknown image {image!r}")
    health_raw = raw.get("health") or {}
    health = Health(
        kind=health_raw.get("kind", ""),
        port=health_raw.get("port", next(iter(ports))),
        path=health_raw.get("path", "/healthz"),
    )
    if health.kind not in _HEALTH_KINDS or health.port not in ports:
        raise TopologyError(f"service {name!r}: health needs kind in {_HEALTH_KINDS} and a port")
    module = raw.get("module")
    program = raw.get("program") or (None if module else "redis")
    if program not in (None, *_PROGRAMS) or (module and raw.get("program")):
        raise TopologyError(f"service {name!r}: give a module or a program in {_PROGRAMS}")
    if module is not None and "metrics" not in ports:
        raise TopologyError(f"service {name!r}: a tidemq service needs a 'metrics' port")
    publish = tuple(raw.get("publish") or ())
    unknown = [p for p in publish if p not in ports]
    if unknown:
        raise TopologyError(f"service {name!r}: publishes unknown ports {unknown}")
    compose = raw.get("compose") or {}
    if not isinstance(compose, dict) or set(compose) - set(_COMPOSE_KEYS):
        raise TopologyError(f"service {name!r}: compose: takes only {_COMPOSE_KEYS}")
    compose_ports = {str(k): int(v) for k, v in (compose.get("ports") or {}).items()}
    if clash := sorted(set(compose_ports) & set(ports)):
        raise TopologyError(f"service {name!r}: compose: ports {clash} are already ports")
    compose_publish = tuple(compose["publish"]) if "publish" in compose else None
    unknown = [p for p in compose_publish or () if p not in {**ports, **compose_ports}]
    if unknown:
        raise TopologyError(f"service {name!r}: compose: publishes unknown ports {unknown}")
    return Service(
        name=name,
        image=image,
        module=module,
        ports=ports,
        publish=publish,
        args=tuple(str(a) for a in raw.get("args") or ()),
        depends_on=tuple(raw.get("depends_on") or ()),
        health=health,
        stateful=bool(raw.get("stateful", False)),
        labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
        program=program,
        profile=raw.get("profile"),
        group=raw.get("group", name),
        compose_ports=compose_ports,
        compose_publish=compose_publish,
        compose_args=tuple(str(a) for a in compose.get("args") or ()),
    )


@dataclasses.dataclass(frozen=True)
class Replication:
    """How every `replica_group` service (a broker group) runs: `replicas` processes of one
    broker_name (1 = a single broker, no replication). Replica r (0..replicas-1, the same in
    every group) is the service `<name>-<r>` with broker id r — its replica id, which it keeps
    whichever role it has — and every port shifted by r * port_step. The group's name stays
    the broker name clients and routes know."""

    replicas: int = 1
    broker_role: str = "SYNC_MASTER"
    min_in_sync_replicas: int = 2
    port_step: int = 100

    @classmethod
    def from_raw(cls, raw: dict | None) -> Replication:
        replication = cls(**(raw or {}))
        if replication.replicas < 1 or replication.port_step < 1:
            raise TopologyError("replication: replicas and port_step must be >= 1")
        if replication.replicas > 1 and not 1 <= replication.min_in_sync_replicas \
                <= replication.replicas:
            raise TopologyError("replication: min_in_sync_replicas must be 1..replicas")
        return replication


def replica_name(group: str, replica: int) -> str:
    """The service (supervisord program, compose service, container, volume stem, log file,
    data directory) of one replica of a broker group: `<group>-<replica id>`, never a role —
    any replica may be the master."""
    return f"{group}-{replica}"


def expand_replica_groups(services: dict, replication: Replication) -> dict:
    """Raw services with every `replica_group` service turned into its replicas
    `<name>-0` .. `<name>-<replicas - 1>` (one replica, `<name>-0`, when replicas is 1); a
    dependency on a group becomes a dependency on every replica of it."""
    groups = {name for name, raw in services.items() if raw.get("replica_group")}
    expanded: dict = {}
    for name, raw in services.items():
        raw = dict(raw)
        if raw.get("depends_on"):
            raw["depends_on"] = [replica_name(dep, r) if dep in groups else dep
                                 for dep in raw["depends_on"]
                                 for r in range(replication.replicas if dep in groups else 1)]
        if not raw.pop("replica_group", False):
            expanded[name] = raw
            continue
        if replication.replicas > 1 and "ha" not in (raw.get("ports") or {}):
            raise TopologyError(f"replica group {name!r} needs an 'ha' port")
        for replica in range(replication.replicas):
            expanded[replica_name(name, replica)] = {
                **_replica(raw, replica, replication), "group": name}
    return expanded


def _replica(raw: dict, replica: int, replication: Replication) -> dict:
    args = [str(a) for a in raw.get("args") or ()]
    if "--broker-id" not in args:
        raise TopologyError("a replica group's args must give --broker-id")
    args[args.index("--broker-id") + 1] = str(replica)
    if replication.replicas == 1:  # a single broker: no replication, no HA port
        return {**raw, "ports": {k: v for k, v in raw["ports"].items() if k != "ha"},
                "args": args}
    args += ["--replication-enabled", "true", "--broker-role", replication.broker_role,
             "--min-in-sync-replicas", str(replication.min_in_sync_replicas),
             "--ha-port", "{port:ha}"]
    ports = {k: int(v) + replica * replication.port_step for k, v in raw["ports"].items()}
    return {**raw, "ports": ports, "args": args}


@dataclasses.dataclass(frozen=True)
class ControlPlane:
    """How the control plane runs (docs/deployment.md#the-control-plane).

    The entry marked `control_plane: etcd` runs as `etcd_members` members of one etcd cluster
    and the one marked `control_plane: config_centers` as `config_centers` config centers;
    instance n is `<name>-<n>`, member n with every port + (n - 1) * `etcd_port_step`, config
    center n with every port + n - 1. One member (`make up ETCD=single`) is a store without
    fault tolerance."""

    etcd_members: int = 1
    config_centers: int = 1
    etcd_port_step: int = 2           # a member's client and peer ports sit side by side
    initial_cluster_token: str = "tidemq-etcd"
    heartbeat_interval_ms: int = 100  # etcd's defaults
    election_timeout_ms: int = 1000
    auto_compaction_retention: int = 100000   # revisions of watch history kept

    @classmethod
    def from_raw(cls, raw: dict | None, etcd: str | None = None) -> ControlPlane:
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(raw or {}) - known):
            raise TopologyError(f"control_plane: unknown settings {unknown} (the store is an "
                                "etcd cluster since issue #35: etcd_members, config_centers...)")
        plane = cls(**(raw or {}))
        if etcd not in (None, "", *ETCD_MODES):
            raise TopologyError(f"etcd mode {etcd!r}: use one of {ETCD_MODES}")
        if etcd == "single":
            plane = dataclasses.replace(plane, etcd_members=1)
        if plane.config_centers < 1:
            raise TopologyError("control_plane: config_centers must be >= 1")
        if plane.etcd_members < 1 or plane.etcd_members % 2 == 0:
            # an even count tolerates no more faults than the odd one below it
            raise TopologyError("control_plane: etcd_members must be odd (1, 3, 5...): "
                                f"{plane.etcd_members}")
        if plane.election_timeout_ms < 5 * plane.heartbeat_interval_ms:
            raise TopologyError("control_plane: election_timeout_ms must be at least 5 x "
                                "heartbeat_interval_ms (etcd refuses to start otherwise)")
        if plane.etcd_port_step < 1 or plane.auto_compaction_retention < 1:
            raise TopologyError("control_plane: etcd_port_step and auto_compaction_retention "
                                "must be >= 1")
        return plane

    @property
    def replicated(self) -> bool:
        return self.etcd_members > 1

    def count(self, role: str) -> int:
        return {"etcd": self.etcd_members, "config_centers": self.config_centers}[role]

    def port_step(self, role: str) -> int:
        return self.etcd_port_step if role == "etcd" else 1


def expand_control_plane(services: dict, plane: ControlPlane) -> dict:
    """Raw services with each `control_plane` entry turned into its instances; a dependency on
    such an entry becomes a dependency on every instance."""
    instances: dict[str, list[str]] = {}
    for name, raw in services.items():
        role = raw.get("control_plane")
        if role is not None:
            if role not in ("etcd", "config_centers"):
                raise TopologyError(f"service {name!r}: control_plane is etcd or config_centers")
            instances[name] = [f"{name}-{i + 1}" for i in range(plane.count(role))]
    expanded: dict = {}
    for name, raw in services.items():
        raw = dict(raw)
        if raw.get("depends_on"):
            raw["depends_on"] = [d for dep in raw["depends_on"] for d in instances.get(dep, [dep])]
        role = raw.pop("control_plane", None)
        if role is None:
            expanded[name] = raw
            continue
        step = plane.port_step(role)
        for index, instance in enumerate(instances[name]):
            ports = {k: int(v) + index * step for k, v in raw["ports"].items()}
            expanded[instance] = {**raw, "ports": ports, "group": name}
    return expanded


def parse(data: dict, *, etcd: str | None = None) -> Topology:
    replication = Replication.from_raw(data.get("replication"))
    control_plane = ControlPlane.from_raw(data.get("control_plane"), etcd)
    services = expand_control_plane(data["services"], control_plane)
    data = {**data, "services": expand_replica_groups(services, replication)}
    images = {
        name: Image(
            name=name,
            dockerfile_dir=raw.get("dockerfile_dir"),
            package=raw.get("package"),
            members=tuple(raw.get("members") or ()),
            upstream=raw.get("upstream"),
            apt=tuple(raw.get("apt") or ()),
            cmd=tuple(raw.get("cmd") or ()),
        )
        for name, raw in (data.get("images") or {}).items()
    }
    services = {name: _service(name, raw, images) for name, raw in data["services"].items()}
    for image in images.values():
        if (image.dockerfile_dir is None) == (image.upstream is None):
            raise TopologyError(f"image {image.name!r}: give dockerfile_dir or upstream")
    for service in services.values():
        missing = [d for d in service.depends_on if d not in services]
        if missing:
            raise TopologyError(f"service {service.name!r} depends on unknown {missing}")
        optional = [d for d in service.depends_on
                    if services[d].profile not in (None, service.profile)]
        if optional:  # it could not start without that profile
            raise TopologyError(f"service {service.name!r} depends on {optional} of a profile")
    tracing = data.get("tracing")
    if tracing is not None and tracing not in services:
        raise TopologyError(f"tracing service {tracing!r} is not a service")
    topology = Topology(images=images, services=services, tracing=tracing,
                        replication=replication, control_plane=control_plane)
    topology.start_order()  # rejects cycles early
    _check_unique_ports(topology)
    return topology


def _check_unique_ports(topology: Topology) -> None:
    seen: dict[int, str] = {}
    for service in topology.services.values():
        for port_name, port in {**service.ports, **service.compose_ports}.items():
            owner = seen.setdefault(port, f"{service.name}.{port_name}")
            if owner != f"{service.name}.{port_name}":
                raise TopologyError(f"port {port} used by both {owner} and {service.name}")


def load(path: Path = TOPOLOGY_FILE, *, replicas: int | None = None, etcd: str | None = None,
         profiles: tuple[str, ...] = ()) -> Topology:
    """The topology; `replicas` overrides `replication.replicas` (`make up REPLICAS=3`) and
    etcd="single" runs a one-member etcd cluster (`make up ETCD=single`).
    Services of a profile (`observability`...) are left out unless `profiles` names it;
    ALL_PROFILES keeps every service (what docker-compose.yml describes)."""
    data = yaml.safe_load(path.read_text())
    if replicas is not None:
        data["replication"] = {**(data.get("replication") or {}), "replicas": replicas}
    topology = parse(data, etcd=etcd)
    return topology if profiles == ALL_PROFILES else topology.select(profiles)


def env_overrides(env) -> dict:
    """`load` arguments from TIDEMQ_REPLICAS and TIDEMQ_ETCD in `env` (what `make up
    REPLICAS=1 ETCD=single` set)."""
    replicas = env.get("TIDEMQ_REPLICAS", "")
    return {"replicas": int(replicas) if replicas else None,
            "etcd": env.get("TIDEMQ_ETCD", "") or None}


def enabled_profiles(env) -> tuple[str, ...]:
    """The profiles switched on by TIDEMQ_<PROFILE>=1 in `env` (what `make up ANALYTICS=1`,
    `make compose-up OBSERVABILITY=1`... set)."""
    return tuple(profile for profile in load(profiles=ALL_PROFILES).profiles()
                 if env.get(f"TIDEMQ_{profile.upper()}", "") not in ("", "0"))


def published_urls(topology: Topology, placement: Placement) -> list[str]:
    """One line per published port: what it is and where, as `make up` prints them."""
    lines = []
    for service in topology.services.values():
        for port_name in service.publish:
            scheme = ("http" if port_name in ("http", "metrics") or service.is_etcd
                      else "redis" if service.is_redis
                      # Kafka's own protocol, not gRPC (either listener of gateway-kafka)
                      else "kafka" if service.module == "tidemq.gatewaykafka"
                      else "spark" if port_name == "spark" else "grpc")
            url = f"{scheme}://127.0.0.1:{placement.port(service, port_name)}"
            label = service.labels.get(port_name, port_name)
            lines.append(f"  {url:<28} {service.name:<16} {label}")
    return lines

"""`make compose-up / compose-down`: the same topology under docker compose.

    python -m deploy.compose up      # engine (starts dockerd as root if needed), images, up -d,
                                     # wait healthy through the published ports, print URLs
    python -m deploy.compose up --profile observability   # plus Prometheus (and Grafana)
    python -m deploy.compose up --profile analytics       # plus the Spark cluster
    python -m deploy.compose down    # docker-compose down, then stop a dockerd we started

Works with `docker-compose` (1.29) or `docker compose` (v2), whichever is installed. A service
of an upstream image (Grafana) is skipped, with the reason printed, when the image is neither
present nor pullable (no registry reachable).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys

from deploy.engine import EngineUnavailable, ensure_engine, stop_engine
from deploy.entry_points import entry_point_urls
from deploy.health import Unhealthy, wait_healthy
from deploy.images import ImageBuildError, base_image, build_images
from deploy.render import COMPOSE_FILE
from deploy.topology import (
    ALL_PROFILES,
    REPO_ROOT,
    Placement,
    Topology,
    enabled_profiles,
    load,
    published_urls,
)

DEFAULT_PROJECT = "tidemq"
PULL_TIMEOUT_S = 120


class StackFailed(RuntimeError):
    """`compose up` itself failed (e.g. a dependency never became healthy)."""


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    raise EngineUnavailable("neither `docker-compose` nor `docker compose` is installed")


def upstream_unavailable(topology: Topology) -> dict[str, str]:
    """Services whose upstream image is not here and cannot be pulled: name -> reason."""
    reasons = {}
    for service in topology.services.values():
        ref = topology.images[service.image].upstream
        if ref is None or _image_present(ref):
            continue
        print(f"+ docker pull {ref}", flush=True)
        try:
            pulled = subprocess.run(["docker", "pull", ref], capture_output=True, text=True,
                                    timeout=PULL_TIMEOUT_S)
            failure = pulled.stderr.strip().splitlines()[-1:] if pulled.returncode else None
        except subprocess.TimeoutExpired:
            failure = [f"no answer in {PULL_TIMEOUT_S} s"]
        if failure is not None:
            reasons[service.name] = (
                f"image {ref} is not present and cannot be pulled ({' '.join(failure)}); "
                f"no registry is reachable here. `docker pull {ref}` (or `docker load`) where "
                "one is, then compose-up again")
    return reasons


def _image_present(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


@dataclasses.dataclass
class ComposeStack:
    """One compose project of the topology; `host_ports` overrides published ports. The
    topology holds the services to run (those of the enabled profiles, see `load`)."""

    project: str = DEFAULT_PROJECT
    host_ports: dict[str, int] = dataclasses.field(default_factory=dict)  # "svc.port" -> port
    topology: Topology = dataclasses.field(default_factory=load)

    def __post_init__(self) -> None:
        self.topology = self.topology.under_compose()   # the services' `compose:` parts

    @property
    def placement(self) -> Placement:
        """How the host reaches the stack: 127.0.0.1 and the published ports."""
        overrides = {
            f"{s.name}.{p}": self.host_ports.get(f"{s.name}.{p}", s.ports[p])
            for s in self.topology.services.values()
            for p in s.publish
        }
        return Placement(port_overrides=overrides)

    def env(self) -> dict[str, str]:
        env = {**os.environ, "TIDEMQ_BASE_IMAGE": base_image(),
               # every profile, so `down` and `ps` see all of the project's containers; `up`
               # names the services it starts
               "COMPOSE_PROFILES": ",".join(load(profiles=ALL_PROFILES).profiles())}
        for service in self.topology.services.values():
            for port_name in service.publish:
                key = f"{service.name}.{port_name}"
                if key in self.host_ports:
                    env[service.env_name(port_name)] = str(self.host_ports[key])
        return env

    def compose(self, *args: str, check: bool = True, capture: bool = False):
        argv = [*compose_command(), "-f", str(COMPOSE_FILE), "-p", self.project, *args]
        print("+", " ".join(argv), flush=True)
        return subprocess.run(
            argv, cwd=REPO_ROOT, env=self.env(), check=check, capture_output=capture, text=True
        )

    def up(self, *, timeout: float = 180.0) -> None:
        # docker-compose 1.29 already waits here for depends_on healthchecks
        started = self.compose("up", "-d", "--no-build", *self.topology.services, check=False)
        if started.returncode != 0:
            raise StackFailed(f"`compose up` failed with exit status {started.returncode}")
        wait_healthy(
            self.topology.services.values(), self.placement, timeout=timeout, progress=print
        )

    def logs(self, tail: int = 40) -> str:
        result = self.compose("logs", "--no-color", f"--tail={tail}", check=False, capture=True)
        return result.stdout + result.stderr

    def down(self, *, volumes: bool = False) -> None:
        self.compose("down", "--remove-orphans", *(["-v"] if volumes else []), check=False)

    def urls(self) -> list[str]:
        return published_urls(self.topology, self.placement)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.compose", description=__doc__)
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--project", default=DEFAULT_PROJECT)
    parser.add_argument("--profile", action="append", default=[],
                        help="also run this profile's services (observability, analytics)")
    args = parser.parse_args(argv)
    # `make compose-up OBSERVABILITY=1 ANALYTICS=1`
    args.profile += [p for p in enabled_profiles(os.environ) if p not in args.profile]
    stack = ComposeStack(project=args.project, topology=load(profiles=tuple(args.profile)))
    if args.command == "down":
        if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
            stack.down()
        if stop_engine():
            print("stopped the dockerd started by compose-up")
        return 0
    try:
        started = ensure_engine()
        if started:
            print(f"started dockerd (pid {started}); `make compose-down` stops it")
        skipped = upstream_unavailable(stack.topology)
        for name, reason in skipped.items():
            print(f"skipping {name}: {reason}")
        stack.topology = stack.topology.select(tuple(args.profile), drop=tuple(skipped))
        build_images(stack.topology)
        stack.up()
    except (EngineUnavailable, ImageBuildError) as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    except (Unhealthy, StackFailed) as exc:
        print(f"FAILED: {exc}\n{stack.logs()}", file=sys.stderr)
        return 1
    print("\nTideMQ (docker compose) is up:")
    print("\n".join([*stack.urls(), *entry_point_urls(stack.topology, stack.placement)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

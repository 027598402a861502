"""Probe services of the topology and wait until they are healthy (with a deadline, no sleeps
as synchronisation: each probe is a real request, repeated until it answers or time is up).

    python -m deploy.health                      # probe every service of `make up`
    python -m deploy.health --port-offset 100 broker-a-1   # one replica; broker-a: all three

gRPC services answer grpc.health.v1 Check, HTTP ones GET /healthz, etcd members GET /health
(200 and {"health":"true"} only while the cluster has a leader), Redis PING.
TIDEMQ_REPLICAS / TIDEMQ_ETCD / TIDEMQ_<PROFILE> say which topology, as for `make up`.
With TIDEMQ_STORE_SECURITY_DIR (the secure profile, deploy/secure_store.py) etcd's /health is
asked over https with the operator's certificate, and Redis over TLS after AUTH.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable

from tidemq.common.healthcheck import grpc_healthy, http_healthy

from deploy.secure_store import StoreSecurity
from deploy.topology import Placement, Service, Topology, enabled_profiles, env_overrides, load

HTTPS_WITH_TLS = frozenset({"gateway", "trace-collector"})  # images serving HTTPS with a cert


def redis_healthy(addr: str, timeout: float = 2.0, *, context: ssl.SSLContext | None = None,
                  password: str = "") -> tuple[bool, str]:
    """PING (over TLS with `context`, after AUTH with `password`)."""
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw, \
                (context.wrap_socket(raw, server_hostname=host) if context
                 else contextlib.nullcontext(raw)) as conn:
            if password:
                secret = password.encode()
                conn.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(secret), secret))
                if not (auth := conn.recv(64)).startswith(b"+OK"):
                    return False, f"{addr}: AUTH {auth.strip().decode(errors='replace')}"
            conn.sendall(b"PING\r\n")
            reply = conn.recv(64)
    except OSError as exc:
        return False, f"{addr}: {exc}"
    return reply.startswith(b"+PONG"), f"{addr}: {reply.strip().decode(errors='replace')}"


def etcd_healthy(url: str, context: ssl.SSLContext, timeout: float = 2.0) -> tuple[bool, str]:
    """GET /health over https, presenting the operator's certificate."""
    try:
        with urllib.request.urlopen(url, timeout=timeout,  # noqa: S310 - local probe
                                    context=context) as response:
            return response.status == 200, f"{url}: HTTP {response.status}"
    except OSError as exc:
        return False, f"{url}: {exc}"


def probe(service: Service, placement: Placement, timeout: float = 2.0) -> tuple[bool, str]:
    """One health probe of one service, through the address `placement` gives it."""
    addr = f"127.0.0.1:{placement.port(service, service.health.port)}"
    security = StoreSecurity.from_env()
    if security is not None and service.is_etcd:
        return etcd_healthy(f"https://{addr}{service.health.path}",
                            security.operator_ssl_context(), timeout)
    if security is not None and service.is_redis:
        return redis_healthy(addr, timeout, context=security.redis_ssl_context(),
                             password=security.redis_password())
    if service.health.kind == "grpc":
        return grpc_healthy(addr, timeout)
    if service.health.kind == "http":
        # the HTTP gateway and the tracing dashboard serve HTTPS with a certificate
        tls = service.image in HTTPS_WITH_TLS and os.environ.get("TIDEMQ_TLS_CERT_FILE")
        scheme = "https" if tls else "http"
        return http_healthy(f"{scheme}://{addr}{service.health.path}", timeout)
    return redis_healthy(addr, timeout)


class Unhealthy(RuntimeError):
    def __init__(self, service: Service, reason: str):
        super().__init__(f"{service.name} did not become healthy: {reason}")
        self.service = service
        self.reason = reason


def wait_healthy(
    services: Iterable[Service],
    placement: Placement,
    *,
    timeout: float = 90.0,
    interval: float = 0.25,
    progress: Callable[[str], None] = lambda line: None,
    still_alive: Callable[[Service], str | None] = lambda service: None,
) -> None:
    """Return once every service answers healthy; raise `Unhealthy` for the first one that
    does not by the deadline, or as soon as `still_alive` reports it gave up (e.g. FATAL)."""
    pending = {s.name: s for s in services}
    deadline = time.monotonic() + timeout
    reasons: dict[str, str] = {}
    while pending:
        for name, service in list(pending.items()):
            ok, reasons[name] = probe(service, placement)
            if ok:
                progress(f"  healthy  {name:<16} {reasons[name]}")
                del pending[name]
                continue
            dead = still_alive(service)
            if dead:
                raise Unhealthy(service, dead)
        if pending and time.monotonic() > deadline:
            first = next(iter(pending.values()))
            raise Unhealthy(first, reasons.get(first.name, "no answer"))
        if pending:
            time.sleep(interval)  # pacing between probe rounds, not synchronisation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.health", description=__doc__)
    parser.add_argument("services", nargs="*", help="service names, or a group's (broker-a: "
                        "its replicas; default: all)")
    parser.add_argument("--port-offset", type=int, default=0)
    args = parser.parse_args(argv)
    topology: Topology = load(**env_overrides(os.environ), profiles=enabled_profiles(os.environ))
    placement = Placement(port_offset=args.port_offset)
    unknown = [n for n in args.services if not topology.named(n)]
    if unknown:
        print(f"unknown services {unknown}; known: {sorted(topology.services)}", file=sys.stderr)
        return 2
    names = [n for given in args.services for n in topology.named(given)] \
        or list(topology.services)
    healthy = True
    for name in names:
        ok, reason = probe(topology.services[name], placement)
        healthy &= ok
        print(f"{'UP  ' if ok else 'DOWN'}  {name:<16} {reason}")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())

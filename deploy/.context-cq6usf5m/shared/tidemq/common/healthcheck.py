"""Health probe usable from supervisors, compose healthchecks and tests.

    python -m tidemq.common.healthcheck grpc 127.0.0.1:9876
    python -m tidemq.common.healthcheck http http://127.0.0.1:8080/healthz

Exit status 0 when healthy, 1 otherwise (with the reason on stderr).
"""

from __future__ import annotations

import dataclasses
import ssl
import sys
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def grpc_healthy(addr: str, timeout: float = 2.0) -> tuple[bool, str]:
    """Over TLS when TIDEMQ_TLS_CA_FILE is set (health checks need no credentials)."""
    from tidemq.common.rpc import ClientSecurity, open_channel

    security = dataclasses.replace(ClientSecurity.from_env(), credentials=None)
    try:
        with open_channel(addr, security, options=[]) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
    except grpc.RpcError as exc:
        return False, f"{addr}: {exc.code().name} {exc.details() or ''}".strip()
    ok = reply.status == health_pb2.HealthCheckResponse.SERVING
    return ok, f"{addr}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"


def http_healthy(url: str, timeout: float = 2.0) -> tuple[bool, str]:
    """An https URL is verified against TIDEMQ_TLS_CA_FILE when that is set, and shown
    TIDEMQ_TLS_CERT_FILE / TIDEMQ_TLS_KEY_FILE when set (a gateway with mutual TLS)."""
    from tidemq.common.rpc import ClientSecurity

    context, security = None, ClientSecurity.from_env()  # the one reader of those variables
    if url.startswith("https:") and security.ca_file:
        context = ssl.create_default_context(cafile=security.ca_file)
        if security.cert_file and security.key_file:
            context.load_cert_chain(security.cert_file, security.key_file)
    try:
        with urllib.request.urlopen(url, timeout=timeout,  # noqa: S310 - local probe
                                    context=context) as response:
            return response.status == 200, f"{url}: HTTP {response.status}"
    except OSError as exc:
        return False, f"{url}: {exc}"


# The command line's deadline for an answer: it runs as a compose healthcheck (10 s for the
# whole probe), where a loaded host may be slow to answer a healthy service.
COMMAND_TIMEOUT_S = 8.0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("grpc", "http"):
        print("usage: python -m tidemq.common.healthcheck grpc HOST:PORT | http URL", file=sys.stderr)
        return 2
    ok, reason = (grpc_healthy if argv[0] == "grpc" else http_healthy)(argv[1], COMMAND_TIMEOUT_S)
    print(reason, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

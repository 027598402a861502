"""Where a newcomer starts: the console, the tracing dashboard and the API document, as full
URLs. `make up`, `make compose-up` and `make status` print these under the published ports,
because `http://127.0.0.1:8080` alone says nothing about `/console`."""

from __future__ import annotations

from deploy.topology import Placement, Topology

# (service, its port, path, what it is): what a user opens first
ENTRY_POINTS = (
    ("gateway-http", "http", "/console/", "web console"),
    ("trace-collector", "http", "/", "tracing dashboard"),
    ("gateway-http", "http", "/openapi.json", "HTTP API document (OpenAPI)"),
)


def entry_point_urls(topology: Topology, placement: Placement) -> list[str]:
    """One line per entry point whose service runs in `topology`."""
    lines = []
    for name, port_name, path, label in ENTRY_POINTS:
        service = topology.services.get(name)
        if service is None:
            continue
        url = f"http://127.0.0.1:{placement.port(service, port_name)}{path}"
        lines.append(f"  {label + ':':<30} {url}")
    return ["  open:", *lines] if lines else []

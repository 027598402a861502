"""What `make up`, `make compose-up` and `make status` print for a newcomer to open."""

from __future__ import annotations

from deploy.entry_points import entry_point_urls
from deploy.topology import Placement, load


def test_the_console_dashboard_and_api_document_are_printed_as_full_urls():
    lines = "\n".join(entry_point_urls(load(), Placement()))
    assert "http://127.0.0.1:8080/console/" in lines
    assert "http://127.0.0.1:16686/" in lines
    assert "http://127.0.0.1:8080/openapi.json" in lines


def test_a_port_offset_moves_the_printed_urls():
    lines = "\n".join(entry_point_urls(load(), Placement(port_offset=1000)))
    assert "http://127.0.0.1:9080/console/" in lines

"""The dashboard's HTTPS server (collector.HttpServer with a tls.ReloadingContext) over real
sockets: a rotated certificate is served to new connections without a restart, and with a
client CA (mutual TLS) a client without a certificate gets no answer."""

from __future__ import annotations

import shutil
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from flask import Flask
from tidemq.common.tls import ReloadingContext
from tidemq.tracecollector.collector import HttpServer

from tests.support.pki import new_pki, rotate
from tests.support.processes import wait_until


def _app() -> Flask:
    app = Flask(__name__)
    app.get("/healthz")(lambda: "ok")
    return app


def _get(port: int, ca: Path, client: Path | None = None) -> str:
    context = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        context.load_cert_chain(client / "client.pem", client / "client-key.pem")
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context,
                                timeout=5) as reply:
        return reply.read().decode()


def _serving(tls: ReloadingContext):
    server = HttpServer(_app(), "127.0.0.1", 0, tls)
    server.start()
    return server


def test_a_rotated_certificate_is_served_without_a_restart(tmp_path):
    old, new = (new_pki(tmp_path / name, "collector", "client") for name in ("old", "new"))
    live = tmp_path / "live"
    shutil.copytree(old, live)
    server = _serving(ReloadingContext(True, str(live / "collector.pem"),
                                       str(live / "collector-key.pem")))
    try:
        assert _get(server.port, old / "ca.pem") == "ok"
        for name in ("collector-key.pem", "collector.pem"):
            rotate(new / name, live / name)

        def new_certificate_served() -> bool:
            try:
                return _get(server.port, new / "ca.pem") == "ok"
            except urllib.error.URLError:
                return False
        wait_until(new_certificate_served, 10, interval=0.2, message="the rotated certificate")
        with pytest.raises(urllib.error.URLError):
            _get(server.port, old / "ca.pem")
    finally:
        server.stop()


def test_with_a_client_ca_a_client_needs_a_certificate(tmp_path):
    pki = new_pki(tmp_path / "pki", "collector", "client")
    server = _serving(ReloadingContext(True, str(pki / "collector.pem"),
                                       str(pki / "collector-key.pem"), str(pki / "ca.pem")))
    try:
        assert _get(server.port, pki / "ca.pem", client=pki) == "ok"
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            _get(server.port, pki / "ca.pem")
    finally:
        server.stop()

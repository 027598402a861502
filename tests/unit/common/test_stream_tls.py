"""The replication stream's TLS contexts (tls.StreamContext) over a real asyncio TLS socket:
both ends authenticated, and rotated files (a key pair, a CA bundle) apply to new connections
after refresh() without a restart."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path

import pytest
from tidemq.common.tls import StreamContext

from tests.support.pki import new_pki, rotate


@pytest.fixture
def two_cas(tmp_path: Path) -> tuple[Path, Path]:
    return (new_pki(tmp_path / "old", "master", "slave"),
            new_pki(tmp_path / "new", "master", "slave"))


def _handshake(server: StreamContext, client: StreamContext) -> bool:
    """One connection from `client` to a server using `server`; True if both ends accept."""
    async def run() -> bool:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(await reader.readexactly(4))
            await writer.drain()
            writer.close()

        listener = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server.context)
        port = listener.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client.context, server_hostname="127.0.0.1")
            writer.write(b"ping")
            reply = await reader.readexactly(4)
            writer.close()
            return reply == b"ping"
        except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
            return False
        finally:
            listener.close()
            await listener.wait_closed()

    return asyncio.run(asyncio.wait_for(run(), 10))


def _contexts(pki: Path, ca_file: Path) -> tuple[StreamContext, StreamContext]:
    return (StreamContext(True, str(pki / "master.pem"), str(pki / "master-key.pem"),
                          str(ca_file)),
            StreamContext(False, str(pki / "slave.pem"), str(pki / "slave-key.pem"),
                          str(ca_file)))


def test_both_ends_must_be_signed_by_the_ca(two_cas):
    old, new = two_cas
    server, client = _contexts(old, old / "ca.pem")
    assert _handshake(server, client)
    _, stranger = _contexts(new, new / "ca.pem")
    assert not _handshake(server, stranger)


def test_a_ca_bundle_and_then_new_key_pairs_rotate_without_a_restart(two_cas, tmp_path):
    old, new = two_cas
    live = tmp_path / "live"
    shutil.copytree(old, live)
    server, client = _contexts(live, live / "ca.pem")
    assert _handshake(server, client)

    # Step 1: both brokers trust old + new. Nothing reloads before refresh().
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes((old / "ca.pem").read_bytes() + (new / "ca.pem").read_bytes())
    rotate(bundle, live / "ca.pem")
    newly_issued = StreamContext(False, str(new / "slave.pem"), str(new / "slave-key.pem"),
                                 str(bundle))  # a slave that joins mid-rotation
    assert not _handshake(server, newly_issued)
    server.refresh()
    client.refresh()
    assert _handshake(server, newly_issued)  # the master now accepts a new-CA slave

    # Step 2: the master's key pair from the new CA; the old-CA slave, refreshed, accepts it.
    for name in ("master.pem", "master-key.pem"):
        rotate(new / name, live / name)
    server.refresh()
    assert _handshake(server, client)


def test_files_that_do_not_load_keep_what_is_in_force(two_cas, tmp_path):
    old, _ = two_cas
    live = tmp_path / "live"
    shutil.copytree(old, live)
    server, client = _contexts(live, live / "ca.pem")
    (live / "ca.pem").write_bytes(b"not a certificate")
    (live / "master.pem").write_bytes(b"half written")
    server.refresh()
    client.refresh()
    assert _handshake(server, client)

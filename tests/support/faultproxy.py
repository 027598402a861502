"""FaultProxy: a TCP proxy on 127.0.0.1 that can black-hole its traffic, for partition tests.

A process is cut off from a peer by pointing it at the proxy instead of the peer and calling
`cut()`: from then on bytes in both directions are read and dropped and new connections are
accepted but never reach the peer, as a partition looks to TCP (silence, not a reset), so the
peers' own timeouts (leases, heartbeats, housekeeping) must notice. `heal()` closes every
connection that lost bytes (a stream with a hole is dead; both ends reconnect) and forwards
again.

`throttle(bytes_per_s)` slows what the peer sends on connections accepted from then on (a
replica catching up over a slow link: it stays connected and keeps copying, just slowly);
`unthrottle()` lets every connection run at full speed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class _Link:
    __slots__ = ("client", "upstream", "tainted", "rate")

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tainted = False   # lost bytes to a cut: closed at heal
        self.rate = 0          # bytes/s from the peer to the client (0 = unlimited)

    def close(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.close()


class FaultProxy:
    def __init__(self, target: str, name: str = "") -> None:
        host, _, port = target.rpartition(":")
        self.target = (host or "127.0.0.1", int(port))
        self.name = name or target
        self.port = 0
        self.is_cut = False
        self.rate = 0          # throttle of connections accepted from now on (0 = none)
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name=f"fault-proxy {self.name}", daemon=True)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self) -> None:
        """Black-hole both directions from now on (also for connections made while cut)."""
        self._run(self._set_cut(True))

    def heal(self) -> None:
        """Forward again; connections that lost bytes are closed so both ends reconnect."""
        self._run(self._set_cut(False))

    def throttle(self, bytes_per_s: int) -> None:
        """Connections accepted from now on get at most `bytes_per_s` from the peer."""
        self._run(self._set_rate(max(1, int(bytes_per_s)), existing=False))

    def unthrottle(self) -> None:
        """Every connection, old and new, at full speed again."""
        self._run(self._set_rate(0, existing=True))

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self._links):
                link.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._run(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- on the proxy's loop -----------------------------------------------------------------
    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _set_rate(self, rate: int, *, existing: bool) -> None:
        """On the proxy's loop, between two steps of a pump: a rate changed from another
        thread could be read as non-zero by a pump's check and as 0 by its division."""
        self.rate = rate
        if existing:
            for link in list(self._links):
                link.rate = rate

    async def _set_cut(self, cut: bool) -> None:
        self.is_cut = cut
        for link in list(self._links):
            if cut:
                link.tainted = True
            elif link.tainted:
                link.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        link.tainted = self.is_cut
        link.rate = self.rate
        self._links.add(link)
        try:
            while self.is_cut:   # a connection made during a cut never reaches the peer
                if not await reader.read(65536):
                    return
                if link.client.is_closing():
                    return
            up_reader, link.upstream = await asyncio.open_connection(*self.target)
            await asyncio.gather(self._pump(reader, link.upstream, link),
                                 self._pump(up_reader, writer, link, downstream=True))
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass   # a cancelled accept task would make asyncio's stream callback log an error
        finally:
            self._links.discard(link)
            link.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    link: _Link, downstream: bool = False) -> None:
        try:
            while data := await reader.read(max(1, min(65536, link.rate // 20))
                                            if downstream and link.rate else 65536):
                if self.is_cut or link.tainted:
                    link.tainted = True
                    continue
                writer.write(data)
                await writer.drain()
                if downstream and (rate := link.rate):   # at most `rate` bytes a second
                    await asyncio.sleep(len(data) / rate)
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                link.close()

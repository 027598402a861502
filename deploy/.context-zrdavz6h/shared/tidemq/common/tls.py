"""TLS for gRPC (server credentials that reload their certificate files, channel credentials)
and for the brokers' replication stream (asyncio TCP; both ends present their certificates).

Why reload: certificates are short-lived and rotated by replacing the files; like RocketMQ's
FileWatchService, a server picks up the new pair without a restart. gRPC asks the fetcher
for the current configuration on every new TLS handshake; it re-reads the files only when
their modification time or size changed, and keeps serving the old pair if the new files do
not load yet (a half-written rotation), so established and new connections never break.
"""

from __future__ import annotations

import os
import ssl
import threading
from pathlib import Path

import grpc
from tidemq.common.logs import get_logger

log = get_logger(__name__)


def _stamp(*paths: str) -> tuple:
    return tuple((os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in paths)


class ReloadingCertificate:
    """The `cert_config_fetcher` of grpc.dynamic_ssl_server_credentials for one key pair (and
    the CA that signs the clients' certificates, with mutual TLS)."""

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str = "") -> None:
        self.cert_file, self.key_file, self.client_ca_file = cert_file, key_file, client_ca_file
        self._files = (cert_file, key_file, *([client_ca_file] if client_ca_file else []))
        self._lock = threading.Lock()
        self._stamp = _stamp(*self._files)
        self.reloads = 0
        self.initial = self._load()

    def _load(self) -> grpc.ServerCertificateConfiguration:
        pair = (Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes())
        if b"PRIVATE KEY" not in pair[0] or b"CERTIFICATE" not in pair[1]:
            raise ValueError(f"{self.cert_file} / {self.key_file} is not a PEM certificate "
                             "and private key")
        clients = Path(self.client_ca_file).read_bytes() if self.client_ca_file else None
        return grpc.ssl_server_certificate_configuration([pair], root_certificates=clients)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        with self._lock:
            try:
                stamp = _stamp(*self._files)
                if stamp == self._stamp:
                    return None
                config = self._load()  # the client CA is replaced whole: a removed CA goes
            except (OSError, ValueError) as exc:
                log.warning("certificate files changed but do not load; keeping the old pair",
                            cert_file=self.cert_file, error=str(exc))
                return None
            self._stamp = stamp
            self.reloads += 1
            log.info("certificate reloaded", cert_file=self.cert_file, reloads=self.reloads)
            return config


def server_credentials(cert_file: str, key_file: str,
                       client_ca_file: str = "") -> grpc.ServerCredentials:
    """`client_ca_file`: mutual TLS, every client must present a certificate it signed."""
    if not key_file:
        raise ValueError("tls_cert_file is set but tls_key_file is not")
    fetcher = ReloadingCertificate(cert_file, key_file, client_ca_file)
    return grpc.dynamic_ssl_server_credentials(
        fetcher.initial, fetcher, require_client_authentication=bool(client_ca_file))


def channel_credentials(ca_file: str, cert_file: str = "",
                        key_file: str = "") -> grpc.ChannelCredentials:
    """Verify servers against `ca_file`; with `cert_file`, show it to servers that ask for a
    client certificate (mutual TLS)."""
    pair = ((Path(key_file).read_bytes(), Path(cert_file).read_bytes())
            if cert_file and key_file else (None, None))
    return grpc.ssl_channel_credentials(root_certificates=Path(ca_file).read_bytes(),
                                        private_key=pair[0], certificate_chain=pair[1])


class ReloadingContext:
    """An ssl.SSLContext for asyncio or socketserver endpoints (gRPC has its own reloading):
    this end presents `cert_file`; with `ca_file` it accepts only peers whose certificate that
    CA signed (a server then asks clients for one). `refresh()` loads rotated files for new
    connections once they changed, and keeps what it has while the new files do not load. A
    CA file's new certificates are added to the ones trusted; OpenSSL cannot forget one, so a
    retired CA stays trusted until a restart (rotate a CA as a bundle: old + new, then the key
    pairs, then drop the old one with a restart)."""

    def __init__(self, server: bool, cert_file: str, key_file: str, ca_file: str = "") -> None:
        purpose = ssl.Purpose.CLIENT_AUTH if server else ssl.Purpose.SERVER_AUTH
        self.context = ssl.create_default_context(purpose, cafile=ca_file or None)
        if ca_file:
            self.context.verify_mode = ssl.CERT_REQUIRED  # a server asks for the client's too
        self.cert_file, self.key_file, self.ca_file = cert_file, key_file, ca_file
        self._files = (cert_file, key_file, *([ca_file] if ca_file else []))
        self._stamp = _stamp(*self._files)
        self.context.load_cert_chain(cert_file, key_file)

    def refresh(self) -> None:
        try:
            stamp = _stamp(*self._files)
            if stamp == self._stamp:
                return
            if stamp[2:] != self._stamp[2:]:
                self.context.load_verify_locations(cafile=self.ca_file)
            if stamp[:2] != self._stamp[:2]:
                self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate files changed but do not load; keeping the old ones",
                        cert_file=self.cert_file, ca_file=self.ca_file, error=str(exc))
            return
        self._stamp = stamp
        log.info("TLS certificates reloaded", cert_file=self.cert_file, ca_file=self.ca_file)


class StreamContext(ReloadingContext):
    """One end of the replication stream: always mutually authenticated."""

    def __init__(self, server: bool, cert_file: str, key_file: str, ca_file: str) -> None:
        if not (cert_file and key_file and ca_file):
            raise ValueError("the replication stream's TLS needs tls_cert_file, tls_key_file "
                             "and tls_ca_file (the CA that signs the other brokers)")
        super().__init__(server, cert_file, key_file, ca_file)

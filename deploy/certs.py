"""`make certs`: a local CA and one certificate per service, for TLS in development.

    python -m deploy.certs [--out .data/certs] [--days 30] [--force]

Writes `ca.pem` / `ca-key.pem` and `<service>.pem` / `<service>-key.pem` for every service of
deploy/topology.yaml (plus `client`), each valid for its service name, `localhost` and
127.0.0.1 so the same files work under `make up` and compose. Uses the `cryptography`
package (no openssl shell). Re-running keeps an existing CA (servers and clients that trust
it keep working) and re-issues the service certificates, which running servers pick up on
their next handshake (tidemq.common.tls reloads changed files).
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_OUT = Path(".data/certs")


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    if private:
        tmp.chmod(0o600)
    os.replace(tmp, path)  # servers reloading never read a half-written file


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def create_ca(out: Path, days: int = 3650, *, common_name: str = "TideMQ local CA"
              ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            # Key identifiers let verifiers tell two CAs of the same name apart (a rotation
            # bundle of old + new CA), as RFC 5280 asks of every CA certificate.
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "ca-key.pem", _pem_key(key), private=True)
    _write(out / "ca.pem", cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def load_ca(out: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    if not (out / "ca.pem").exists() or not (out / "ca-key.pem").exists():
        return None
    cert = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((out / "ca-key.pem").read_bytes(), None)
    return cert, key  # type: ignore[return-value]


def issue(out: Path, service: str, ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
          *, days: int = 30, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
          common_name: str = "", server: bool = True, client: bool = True) -> Path:
    """`<service>.pem` / `<service>-key.pem` signed by `ca`, valid for `service` and `hosts`.
    `common_name` (default `service`): the subject's CN (etcd takes a client certificate's CN
    as a user name); `server` / `client`: the extended key usages it carries."""
    ca_cert, ca_key = ca
    key = _key()
    names: list[x509.GeneralName] = []
    for host in (service, *hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        common_name or service)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [*([ExtendedKeyUsageOID.SERVER_AUTH] if server else []),
                 *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(out / f"{service}-key.pem", _pem_key(key), private=True)
    _write(out / f"{service}.pem", cert.public_bytes(serialization.Encoding.PEM))
    return out / f"{service}.pem"


def topology_services() -> list[str]:
    from deploy.topology import load

    return [name for name, service in load().services.items() if service.module]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--days", type=int, default=30, help="service certificate validity")
    parser.add_argument("--services", default="", help="comma-separated names "
                        "(default: every service of deploy/topology.yaml, plus 'client')")
    parser.add_argument("--force", action="store_true", help="also replace the CA")
    args = parser.parse_args(argv)
    ca = None if args.force else load_ca(args.out)
    if ca is None:
        ca = create_ca(args.out)
        print(f"created CA {args.out / 'ca.pem'}")
    services = [s for s in args.services.split(",") if s] or [*topology_services(), "client"]
    for service in services:
        print(f"issued {issue(args.out, service, ca, days=args.days)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

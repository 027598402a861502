"""The `secure` profile of `make up`: auth and TLS on every service (docs/security.md).

    make up-secure        # = python -m deploy.secure up
    set -a; . .data/certs/secure.env; set +a    # then the CLI and SDK sign and use TLS
    tidemq acl user add alice --secret-key ...

It creates (once) a local CA and a certificate for localhost / 127.0.0.1 (deploy.certs) and a
cluster admin credential, writes them as TIDEMQ_* variables to `.data/certs/secure.env`
(mode 600), and runs `make up` with them in the environment: every service then has
auth_enabled, its own access_key / secret_key (the super user services call each other with),
tls_cert_file / tls_key_file / tls_ca_file. Stop with `make down`; a running supervisord keeps
the environment it was started with, so switch profiles after `make down`.

The stores are secured too (deploy/secure_store.py, material in `.data/certs/store`, named by
TIDEMQ_STORE_SECURITY_DIR): etcd with mutual TLS from its own CA and etcd authentication
(turned on by `make up` once the members serve), only the config centers holding an etcd
credential; Redis with TLS and a password; the ACL users' secrets encrypted at rest with a key
only the config centers are given.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from deploy import certs, local
from deploy.secure_store import ENV_VAR as STORE_ENV_VAR
from deploy.secure_store import StoreSecurity
from deploy.topology import env_overrides, load

CERT_DIR = certs.DEFAULT_OUT
ENV_FILE = CERT_DIR / "secure.env"
ADMIN_KEY = "cluster-admin"
LOCAL_CERT = "local"  # one certificate for every process on this machine


def secure_env(cert_dir: Path = CERT_DIR) -> dict[str, str]:
    """The profile's variables, creating the CA, certificate and credential the first time."""
    cert_dir = cert_dir.resolve()
    ca = certs.load_ca(cert_dir) or certs.create_ca(cert_dir)
    if not (cert_dir / f"{LOCAL_CERT}.pem").exists():
        certs.issue(cert_dir, LOCAL_CERT, ca)
    # every member the topology can run (ETCD=single is etcd-1 of the same set)
    members = [m.name for m in load(**env_overrides(os.environ)).etcd_members()]
    store = StoreSecurity.create(cert_dir / "store", members)
    env_file = cert_dir / ENV_FILE.name
    if env_file.exists():
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines()
                   if "=" in line and not line.startswith("#"))
        if STORE_ENV_VAR not in env:  # written before the stores were secured
            env[STORE_ENV_VAR] = str(store.directory)
            _write_env(env_file, env)
        return env
    env = {
        "TIDEMQ_AUTH_ENABLED": "true",
        "TIDEMQ_ACCESS_KEY": ADMIN_KEY,
        "TIDEMQ_SECRET_KEY": secrets.token_urlsafe(32),
        "TIDEMQ_TLS_CERT_FILE": str(cert_dir / f"{LOCAL_CERT}.pem"),
        "TIDEMQ_TLS_KEY_FILE": str(cert_dir / f"{LOCAL_CERT}-key.pem"),
        "TIDEMQ_TLS_CA_FILE": str(cert_dir / "ca.pem"),
        # the tracing dashboard serves HTTPS here too: the console's trace links follow
        "TIDEMQ_TRACE_UI_URL": "https://127.0.0.1:16686",
        # the stores' certificates, passwords and encryption key (deploy/secure_store.py):
        # `make up` gives each process only its own; `make status` probes etcd and Redis
        STORE_ENV_VAR: str(store.directory),
    }
    _write_env(env_file, env)
    return env


def _write_env(env_file: Path, env: dict[str, str]) -> None:
    env_file.write_text("# the secure profile (deploy/secure.py): `set -a; . this; set +a`\n"
                        + "".join(f"{k}={v}\n" for k, v in env.items()))
    env_file.chmod(0o600)


def main(argv: list[str]) -> int:
    env = secure_env()
    os.environ.update(env)
    print(f"secure profile: auth and TLS on; admin credential and paths in {ENV_FILE}")
    return local.main(argv or ["up"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

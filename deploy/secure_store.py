"""The secure profile's stores (docs/security.md#the-stores): no store node answers a client
without credentials, and only the config centers hold a credential for the config store.

- **etcd**: client and peer URLs are https with client certificates required
  (`--client-cert-auth`, `--peer-client-cert-auth`), from a CA of its own (`etcd/ca.pem`),
  not the project CA that signs every service's certificate: a service certificate is not
  accepted by etcd. The CA issues one certificate per member (server and peer), one for the
  config centers (CN `tidemq-config-center`) and one for the operator's probes and
  `make status` (CN `tidemq-operator`). etcd's authentication is on: user `root` (role root,
  for this bootstrap and an operator's etcdctl) and user `tidemq` with role `tidemq`, which may
  read and write the keys only (no user, role, membership or maintenance call beyond what
  etcd leaves open). No etcd user is named after a certificate's CN, so a certificate alone
  (etcd takes its CN as the user when no token is sent) is granted nothing.
- **Redis** (the gateways' breaker state): TLS only (`--port 0 --tls-port`), its certificate
  from a CA of its own (`redis/ca.pem`), and `requirepass` from its config file (mode 600:
  never on a command line). The gateway gets `rediss://`, `--redis-password-file` and
  `--redis-ca-file`.
- **Secrets at rest**: the config centers get `--store-encryption-key-file`
  (`encryption.keys`, tidemq.configcenter.encryption).

Everything lives in one directory (mode 700; `.data/certs/store`, named by
TIDEMQ_STORE_SECURITY_DIR in secure.env) and is created once: passwords and keys are kept on
re-runs.
"""

from __future__ import annotations

import os
import secrets
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc
from tidemq.etcd import rpc_pb2 as etcd
from tidemq.etcd import rpc_pb2_grpc as etcd_grpc

from deploy import certs

ENV_VAR = "TIDEMQ_STORE_SECURITY_DIR"
ETCD_USER = "tidemq"   # the config centers' etcd user and role
ROOT_USER = "root"
CONFIG_CENTER_CN = "tidemq-config-center"
OPERATOR_CN = "tidemq-operator"


class StoreSecurityError(RuntimeError):
    pass


@dataclass(frozen=True)
class StoreSecurity:
    directory: Path

    # -- files ---------------------------------------------------------------------------

    @property
    def etcd_dir(self) -> Path:
        return self.directory / "etcd"

    @property
    def redis_dir(self) -> Path:
        return self.directory / "redis"

    @property
    def etcd_ca(self) -> Path:
        return self.etcd_dir / "ca.pem"

    def member_pair(self, member: str) -> tuple[Path, Path]:
        return self.etcd_dir / f"{member}.pem", self.etcd_dir / f"{member}-key.pem"

    @property
    def config_center_pair(self) -> tuple[Path, Path]:
        return self.etcd_dir / "config-center.pem", self.etcd_dir / "config-center-key.pem"

    @property
    def operator_pair(self) -> tuple[Path, Path]:
        return self.etcd_dir / "operator.pem", self.etcd_dir / "operator-key.pem"

    @property
    def root_password_file(self) -> Path:
        return self.etcd_dir / "root.password"

    @property
    def etcd_password_file(self) -> Path:
        return self.etcd_dir / f"{ETCD_USER}.password"

    @property
    def redis_ca(self) -> Path:
        return self.redis_dir / "ca.pem"

    @property
    def redis_pair(self) -> tuple[Path, Path]:
        return self.redis_dir / "redis.pem", self.redis_dir / "redis-key.pem"

    @property
    def redis_password_file(self) -> Path:
        return self.redis_dir / "redis.password"

    @property
    def redis_conf(self) -> Path:
        return self.redis_dir / "redis.conf"

    @property
    def encryption_key_file(self) -> Path:
        return self.directory / "encryption.keys"

    # -- creation ------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, members: Iterable[str],
               hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> StoreSecurity:
        """Whatever is missing of the material (kept on re-runs; a member added later gets
        its certificate)."""
        from tidemq.configcenter.encryption import new_key_line

        self = cls(Path(directory).resolve())
        for path in (self.directory, self.etcd_dir, self.redis_dir):
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o700)
        etcd_ca = certs.load_ca(self.etcd_dir) or certs.create_ca(
            self.etcd_dir, common_name="TideMQ etcd CA")
        for member in members:
            if not self.member_pair(member)[0].exists():
                certs.issue(self.etcd_dir, member, etcd_ca, hosts=hosts, days=365)
        for name, cn in (("config-center", CONFIG_CENTER_CN), ("operator", OPERATOR_CN)):
            if not (self.etcd_dir / f"{name}.pem").exists():
                certs.issue(self.etcd_dir, name, etcd_ca, hosts=(), common_name=cn,
                            server=False, days=365)
        redis_ca = certs.load_ca(self.redis_dir) or certs.create_ca(
            self.redis_dir, common_name="TideMQ Redis CA")
        if not self.redis_pair[0].exists():
            certs.issue(self.redis_dir, "redis", redis_ca, hosts=hosts, client=False, days=365)
        for path in (self.root_password_file, self.etcd_password_file,
                     self.redis_password_file):
            if not path.exists():
                _write_private(path, secrets.token_urlsafe(32) + "\n")
        if not self.encryption_key_file.exists():
            _write_private(self.encryption_key_file,
                           "# store encryption key ring: the first line is the current key "
                           "(docs/security.md#secrets-at-rest)\n" + new_key_line() + "\n")
        self.write_redis_conf()
        return self

    def write_redis_conf(self) -> None:
        cert, key = self.redis_pair
        _write_private(self.redis_conf, "".join(f"{line}\n" for line in (
            "# the secure profile's Redis (deploy/secure_store.py): TLS, a password",
            f"requirepass {self.redis_password()}",
            f"tls-cert-file {cert}", f"tls-key-file {key}", f"tls-ca-cert-file {self.redis_ca}",
            "tls-auth-clients no",   # clients authenticate with the password
        )))

    @classmethod
    def from_env(cls, env=os.environ) -> StoreSecurity | None:
        directory = env.get(ENV_VAR, "")
        return cls(Path(directory)) if directory else None

    # -- secrets -------------------------------------------------------------------------

    def root_password(self) -> str:
        return self.root_password_file.read_text().strip()

    def etcd_password(self) -> str:
        return self.etcd_password_file.read_text().strip()

    def redis_password(self) -> str:
        return self.redis_password_file.read_text().strip()

    # -- what each process is given ------------------------------------------------------

    def etcd_tls(self, member: str) -> dict[str, str]:
        """For deploy.etcd_cluster.argv: the member's pair and the etcd CA."""
        cert, key = self.member_pair(member)
        return {"cert_file": str(cert), "key_file": str(key),
                "trusted_ca_file": str(self.etcd_ca)}

    def config_center_args(self) -> list[str]:
        cert, key = self.config_center_pair
        return ["--etcd-ca-file", str(self.etcd_ca), "--etcd-cert-file", str(cert),
                "--etcd-key-file", str(key), "--etcd-user", ETCD_USER,
                "--etcd-password-file", str(self.etcd_password_file),
                "--store-encryption-key-file", str(self.encryption_key_file)]

    def redis_argv(self, redis_server: str, bind: str, port: int, data_dir: str) -> list[str]:
        return [redis_server, str(self.redis_conf), "--bind", bind, "--port", "0",
                "--tls-port", str(port), "--dir", data_dir, "--protected-mode", "no",
                "--appendonly", "yes"]

    def gateway_args(self, args: list[str]) -> list[str]:
        """The gateway's flags with its Redis URL made `rediss://` and the password and CA
        given as files."""
        out = [("rediss://" + a.removeprefix("redis://")) if a.startswith("redis://") else a
               for a in args]
        if out != args:
            out += ["--redis-password-file", str(self.redis_password_file),
                    "--redis-ca-file", str(self.redis_ca)]
        return out

    def operator_credentials(self) -> grpc.ChannelCredentials:
        cert, key = self.operator_pair
        return grpc.ssl_channel_credentials(self.etcd_ca.read_bytes(), key.read_bytes(),
                                            cert.read_bytes())

    def operator_ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.etcd_ca))
        context.load_cert_chain(*map(str, self.operator_pair))
        return context

    def redis_ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.redis_ca))


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


# --- etcd authentication ---------------------------------------------------------------------


def _already_exists(exc: grpc.RpcError) -> bool:
    return "already exists" in (exc.details() or "")


def bootstrap_etcd_auth(endpoints: list[str], security: StoreSecurity, *,
                        key_prefix: bytes = b"", timeout: float = 5.0) -> str:
    """Turn etcd's authentication on (once): user root (role root) and user `tidemq` with
    role `tidemq` granted read and write on the config centers' keys (`key_prefix`, b"" =
    every key: the cluster is theirs alone), with the passwords of `security`. Idempotent: a
    cluster whose root password already works is left as it is. Returns what it did."""
    credentials = security.operator_credentials()
    last: grpc.RpcError | None = None
    for endpoint in endpoints:
        with grpc.secure_channel(endpoint, credentials) as channel:
            auth = etcd_grpc.AuthStub(channel)
            try:
                auth.Authenticate(etcd.AuthenticateRequest(
                    name=ROOT_USER, password=security.root_password()), timeout=timeout)
                return "etcd authentication already on"
            except grpc.RpcError as exc:
                last = exc
                detail = exc.details() or ""
                if exc.code() == grpc.StatusCode.UNAVAILABLE:
                    continue
                if "authentication is not enabled" not in detail:
                    raise StoreSecurityError(
                        f"etcd at {endpoint} refused the root password of "
                        f"{security.root_password_file}: {detail} (the data directories "
                        "were set up with other credentials: `make down`, then remove "
                        ".data/etcd-* to start the store afresh)") from None
            _enable(auth, security, key_prefix, timeout)
            return "etcd authentication turned on (users root, tidemq)"
    raise StoreSecurityError(f"no etcd member answered ({', '.join(endpoints)}): "
                             f"{last.details() if last else 'none given'}")


def _enable(auth, security: StoreSecurity, key_prefix: bytes, timeout: float) -> None:
    def call(method: str, request) -> None:
        try:
            getattr(auth, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            if not _already_exists(exc):
                raise StoreSecurityError(f"etcd {method}: {exc.details()}") from None

    if key_prefix:
        from tidemq.configcenter.store import prefix_end

        key, end = key_prefix, prefix_end(key_prefix)
    else:
        key, end = b"\0", b"\0"  # every key
    call("RoleAdd", etcd.AuthRoleAddRequest(name=ETCD_USER))
    call("RoleGrantPermission", etcd.AuthRoleGrantPermissionRequest(
        name=ETCD_USER, perm=etcd.Permission(permType=etcd.Permission.READWRITE, key=key,
                                             range_end=end)))
    for user, password, role in ((ROOT_USER, security.root_password(), "root"),
                                 (ETCD_USER, security.etcd_password(), ETCD_USER)):
        call("UserAdd", etcd.AuthUserAddRequest(name=user, password=password))
        # a user left by an interrupted bootstrap gets this run's password
        call("UserChangePassword", etcd.AuthUserChangePasswordRequest(name=user,
                                                                      password=password))
        call("UserGrantRole", etcd.AuthUserGrantRoleRequest(user=user, role=role))
    call("AuthEnable", etcd.AuthEnableRequest())

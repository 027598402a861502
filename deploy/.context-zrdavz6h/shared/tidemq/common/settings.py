"""Service settings: defaults in code → config file → TIDEMQ_* environment → command line.

A service declares a dataclass extending `ServiceSettings`; every field is a documented setting
(its `metadata["help"]`), so `--help` lists them all and nothing reads an undocumented
environment variable. Values are str, int, float or bool; lists are strings the service splits
(e.g. name-server addresses separated by ';').
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tomllib
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from tidemq.common.sampling import QUIET_BY_DEFAULT

ENV_PREFIX = "TIDEMQ_"

T = TypeVar("T", bound="ServiceSettings")


def setting(default: Any, help: str) -> Any:  # noqa: A002 - mirrors argparse's name
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass
class ServiceSettings:
    host: str = setting("127.0.0.1", "address to bind the service's listener to")
    port: int = setting(0, "gRPC port (0 = pick a free port)")
    advertised_host: str = setting(
        "127.0.0.1", "host other processes use to reach this one (never guessed from interfaces)"
    )
    metrics_port: int = setting(0, "Prometheus /metrics port (0 = pick a free port, -1 = off)")
    otlp_endpoint: str = setting("", "OTLP/gRPC trace collector host:port ('' = no tracing)")
    trace_quiet_operations: str = setting(
        ",".join(QUIET_BY_DEFAULT),
        "operations whose root spans are not traced (routine calls; sampling.py)")
    log_level: str = setting("info", "debug, info, warning or error")
    log_format: str = setting("console", "console (human) or json")
    data_dir: str = setting("./.data/service", "directory for the service's persistent data")
    ready_file: str = setting("", "write {port, metrics_port, pid} as JSON here once serving")
    shutdown_grace_s: float = setting(5.0, "seconds to drain in-flight calls on SIGTERM")
    # security (docs/security.md)
    auth_enabled: bool = setting(
        False, "require RocketMQ 5 HMAC-signed calls and apply the config center's ACL")
    auth_config_center: str = setting(
        "", "config center(s) to follow the ACL from ('' = the service's config_center "
        "setting; the config center follows itself)")
    auth_skew_s: float = setting(
        900.0, "seconds a signed request's x-mq-date-time may differ from this clock")
    access_key: str = setting(
        "", "this process's own access key: signs its calls, always accepted as a super user")
    secret_key: str = setting("", "the secret key of access_key (never logged)")
    tls_cert_file: str = setting(
        "", "PEM certificate this process presents: its servers serve TLS with it ('' = "
        "plaintext), and its channels show it to servers that ask for a client certificate")
    tls_key_file: str = setting("", "PEM private key of tls_cert_file")
    tls_client_ca_file: str = setting(
        "", "mutual TLS: PEM CA that must sign every client's certificate on this process's "
        "servers ('' = clients are not asked for one)")
    tls_ca_file: str = setting(
        "", "PEM CA that signs the servers this process calls ('' = plaintext channels)")
    tls_server_name: str = setting(
        "", "name to check in server certificates instead of the host dialled ('' = the host)")

    @property
    def advertised_addr(self) -> str:
        return f"{self.advertised_host}:{self.port}"


class SettingsError(ValueError):
    pass


def _coerce(name: str, kind: type, raw: Any) -> Any:
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise SettingsError(f"setting {name!r}: {raw!r} is not a valid {kind.__name__}") from None


def _read_file(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise SettingsError(f"config file {path!r} does not exist")
    text = file.read_text()
    if file.suffix == ".toml":
        data = tomllib.loads(text)
    else:  # PyYAML here only: every service imports this module, few read a YAML file
        import yaml

        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise SettingsError(f"config file {path!r} must hold a mapping of settings")
    return {key.replace("-", "_"): value for key, value in data.items()}


def load_settings(cls: type[T], argv: list[str] | None = None, *, prog: str | None = None) -> T:
    """Build `cls` from defaults, `--config FILE`, TIDEMQ_<FIELD> variables and flags."""
    hints = get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__)
    parser.add_argument("--config", help="TOML or YAML file of settings")
    for f in fields:
        kind = hints[f.name]
        env = ENV_PREFIX + f.name.upper()
        parser.add_argument(
            "--" + f.name.replace("_", "-"), dest=f.name, default=None, metavar=kind.__name__.upper(),
            help=f"{f.metadata.get('help', '')} (default {f.default!r}; env {env})",
        )
    args = parser.parse_args(argv)
    values: dict[str, Any] = {}
    if args.config:
        known = {f.name for f in fields}
        file_values = _read_file(args.config)
        unknown = sorted(set(file_values) - known)
        if unknown:
            raise SettingsError(f"config file {args.config!r} has unknown settings: {unknown}")
        values.update(file_values)
    for f in fields:
        env = os.environ.get(ENV_PREFIX + f.name.upper())
        if env is not None:
            values[f.name] = env
        flag = getattr(args, f.name)
        if flag is not None:
            values[f.name] = flag
    return cls(**{name: _coerce(name, hints[name], raw) for name, raw in values.items()})

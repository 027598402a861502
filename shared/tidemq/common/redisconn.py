"""One way to name and open the Redis that holds TideMQ's control-plane state.

A single Redis is `redis://host:port/db`. A replicated Redis under Sentinel (the default
topology: a master, two replicas, three Sentinels) is

    redis+sentinel://host:port[,host:port...]/MASTER_NAME[/DB]

— the Sentinels to ask, the name they monitor the master under, and the database number. A
client opened from such a URL asks the Sentinels for the current master on every new
connection, so it follows a failover without a restart (redis-py's `Sentinel.master_for`);
`drop_connections` makes it ask again at once after a sign that the master moved (READONLY,
NOREPLICAS). Only redis-py's documented API is used; this module only parses and chooses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.sentinel import Sentinel

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379


class RedisUrlError(ValueError):
    """A Redis URL that cannot be used, with a sentence saying why."""


@dataclass(frozen=True)
class RedisTarget:
    """What a URL names: a plain Redis URL, or Sentinels plus a master name and a database."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str = ""
    db: int = 0
    password: str | None = None

    @property
    def replicated(self) -> bool:
        return bool(self.sentinels)

    def describe(self) -> str:
        """The target without its password, for logs and error messages."""
        if not self.replicated:
            parts = urlsplit(self.url)
            host = parts.hostname or "127.0.0.1"
            return f"redis {host}:{parts.port or 6379}/{(parts.path or '/0').lstrip('/') or 0}"
        sentinels = ",".join(f"{host}:{port}" for host, port in self.sentinels)
        return f"redis master {self.master_name!r} (db {self.db}) via sentinels {sentinels}"


def parse(url: str) -> RedisTarget:
    """Read `url`; RedisUrlError names what is wrong with it."""
    if not url:
        raise RedisUrlError("the Redis URL is empty")
    parts = urlsplit(url)
    if parts.scheme in ("redis", "rediss", "unix"):
        return RedisTarget(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise RedisUrlError(f"unsupported Redis URL scheme {parts.scheme!r} in {url!r}: use "
                            f"redis://host:port/db or {SENTINEL_SCHEME}://host:port,.../master/db")
    netloc = parts.netloc.rpartition("@")
    password = unquote(netloc[0].partition(":")[2] or netloc[0]) if netloc[1] else None
    sentinels = []
    for item in filter(None, netloc[2].split(",")):
        host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        try:
            sentinels.append((host, int(port) if port else DEFAULT_SENTINEL_PORT))
        except ValueError:
            raise RedisUrlError(f"bad sentinel address {item!r} in {url!r}") from None
    if not sentinels:
        raise RedisUrlError(f"no sentinel address in {url!r}")
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise RedisUrlError(f"no master name in {url!r} ({SENTINEL_SCHEME}://host:port/NAME/DB)")
    try:
        db = int(path[1]) if len(path) > 1 else 0
    except ValueError:
        raise RedisUrlError(f"bad database number {path[1]!r} in {url!r}") from None
    return RedisTarget(url, tuple(sentinels), unquote(path[0]), db, password)


def auth_options(password: str = "", ca_file: str = "") -> dict[str, Any]:
    """redis-py keywords for a Redis with `requirepass` and TLS (a rediss:// URL): the
    password given apart from the URL (read from a file, so it is on no command line) and the
    CA that signs the server's certificate."""
    options: dict[str, Any] = {}
    if password:
        options["password"] = password
    if ca_file:
        options["ssl_ca_certs"] = ca_file
    return options


def connect(url: str | RedisTarget, *, socket_timeout: float,
            socket_connect_timeout: float | None = None, **kwargs: Any) -> redis.Redis:
    """A redis-py client for the master `url` names (kwargs go to redis-py as they are)."""
    target = url if isinstance(url, RedisTarget) else parse(url)
    connect_timeout = socket_connect_timeout if socket_connect_timeout is not None \
        else socket_timeout
    if not target.replicated:
        return redis.Redis.from_url(target.url, socket_timeout=socket_timeout,
                                    socket_connect_timeout=connect_timeout, **kwargs)
    sentinel = Sentinel(list(target.sentinels),
                        sentinel_kwargs={"socket_timeout": connect_timeout,
                                         "socket_connect_timeout": connect_timeout})
    return sentinel.master_for(target.master_name, db=target.db, password=target.password,
                               socket_timeout=socket_timeout,
                               socket_connect_timeout=connect_timeout, **kwargs)


def drop_connections(client: redis.Redis) -> None:
    """Close every idle pooled connection: the next call connects afresh and, under Sentinel,
    asks the Sentinels where the master is now. Connections in use by other threads are left
    alone: closing one under a call in flight would make redis-py retry it, and a write
    retried after it ran would apply twice."""
    client.connection_pool.disconnect(inuse_connections=False)

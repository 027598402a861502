"""The gateway's breaker Redis credentials: the password comes from a file (never the URL or a
command line), the CA goes with a rediss:// URL only."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument
from tidemq.common.rpc import BreakerSettings
from tidemq.gateway.backend import _redis_auth
from tidemq.gateway.settings import GatewaySettings


def test_the_password_is_read_from_its_file_and_never_shown(tmp_path):
    password_file = tmp_path / "redis.password"
    password_file.write_text("s3cret-redis\n")
    settings = GatewaySettings(redis_url="rediss://127.0.0.1:6379/0",
                               redis_password_file=str(password_file),
                               redis_ca_file=str(tmp_path / "ca.pem"))
    auth = _redis_auth(settings)
    assert auth == {"redis_password": "s3cret-redis", "redis_ca_file": str(tmp_path / "ca.pem")}
    assert "s3cret-redis" not in repr(BreakerSettings(redis_url=settings.redis_url, **auth))


def test_a_ca_without_tls_or_a_missing_password_file_is_refused(tmp_path):
    with pytest.raises(InvalidArgument, match="rediss://"):
        _redis_auth(GatewaySettings(redis_url="redis://127.0.0.1:6379/0",
                                    redis_ca_file="ca.pem"))
    with pytest.raises(InvalidArgument, match="--redis-password-file"):
        _redis_auth(GatewaySettings(redis_url="redis://127.0.0.1:6379/0",
                                    redis_password_file=str(tmp_path / "absent")))
    assert _redis_auth(GatewaySettings()) == {"redis_password": "", "redis_ca_file": ""}

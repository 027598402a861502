"""`tidemq quota set|list|delete` against a real config center (over etcd): values land where
brokers read them, precedence entities are named as Kafka names them, and bad input is one
precise error line with exit status 1."""

from __future__ import annotations

import json

from tidemq.client.cli import app
from tidemq.configclient.client import ConfigClient
from typer.testing import CliRunner


def test_quota_set_list_delete_and_refusals(etcd_server, services):
    center = services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])
    runner = CliRunner()

    def tidemq(*args: str, expect: int = 0) -> str:
        result = runner.invoke(app, ["--config-center", center.addr, *args])
        assert result.exit_code == expect, (args, result.output, result.exception)
        return result.output

    assert "producer_byte_rate=1048576 bytes/s" in tidemq(
        "quota", "set", "--client", "orders-svc", "producer_byte_rate=1048576")
    tidemq("quota", "set", "--client", "orders-svc", "request_rate=50")   # merged, not replaced
    tidemq("quota", "set", "--default-user", "consumer_byte_rate=2_097_152")
    stored = json.loads(ConfigClient(center.addr).get("/tidemq/quotas/clients/orders-svc").value)
    assert stored == {"producer_byte_rate": 1048576, "request_rate": 50}
    listed = json.loads(tidemq("quota", "list", "-o", "json"))
    assert listed == [
        {"kind": "client", "name": "orders-svc",
         "quotas": {"producer_byte_rate": 1048576.0, "request_rate": 50.0}},
        {"kind": "user", "name": "<default>", "quotas": {"consumer_byte_rate": 2097152.0}}]
    assert "(default)" in tidemq("quota", "list")

    for args, says in [
        (("--client", "x", "producer_byte_rate=0"), "producer_byte_rate must be a whole number "
                                                    "of bytes/s from 1 to"),
        (("--client", "x", "producer_byte_rate=lots"), "not 'lots'"),
        (("--client", "x", "bytes=5"), "unknown quota 'bytes': known are producer_byte_rate"),
        (("--client", "x", "request_rate"), "is not name=value"),
        (("--user", "a", "--client", "b", "request_rate=1"), "name exactly one entity"),
        (("--client", "a/b", "request_rate=1"), "without '/'"),
    ]:
        output = tidemq("quota", "set", *args, expect=1)
        assert "error INVALID_ARGUMENT" in output and says in " ".join(output.split()), output

    assert "now producer_byte_rate" in tidemq("quota", "delete", "--client", "orders-svc",
                                              "request_rate")
    assert "QUOTA_NOT_FOUND" in tidemq("quota", "delete", "--client", "orders-svc",
                                       "request_rate", expect=1)
    assert "deleted" in tidemq("quota", "delete", "--client", "orders-svc")
    assert ConfigClient(center.addr).get("/tidemq/quotas/clients/orders-svc") is None
    # A raw write of a bad entry is refused by the config center itself.
    from tidemq.common.errors import InvalidArgument

    try:
        ConfigClient(center.addr).put("/tidemq/quotas/clients/x", b'{"request_rate": -1}')
    except InvalidArgument as exc:
        assert exc.code == "INVALID_QUOTA" and "request_rate must be > 0" in exc.message
    else:
        raise AssertionError("the config center stored a negative quota")

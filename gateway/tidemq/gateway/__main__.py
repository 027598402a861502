"""`python -m tidemq.gateway --namesrv-addrs h:p;h:p --config-center h:p --port 8080`."""

from __future__ import annotations

import sys

from tidemq.common.settings import SettingsError, load_settings
from tidemq.gateway.settings import GatewaySettings


def main(argv: list[str] | None = None) -> int:
    from tidemq.gateway.server import prepare_metrics_dir

    prepare_metrics_dir()  # before anything imports prometheus_client
    try:
        settings = load_settings(GatewaySettings, argv, prog="python -m tidemq.gateway")
    except SettingsError as exc:
        print(f"tidemq.gateway: {exc}", file=sys.stderr)
        return 2
    from tidemq.gateway.server import run

    run(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())

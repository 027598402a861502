"""`python -m tidemq.broker`: run one broker until SIGTERM, then stop cleanly."""

from __future__ import annotations

import sys

from tidemq.broker.app import BrokerApp
from tidemq.broker.settings import BrokerSettings
from tidemq.common.settings import load_settings
from tidemq.common.stopsignal import StopSignal


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(BrokerSettings, argv, prog="python -m tidemq.broker")
    app = BrokerApp(settings)
    stop = StopSignal().install()
    app.start()
    stop.wait()
    app.stop()


if __name__ == "__main__":
    main(sys.argv[1:])

"""`python -m tidemq.broker`: run one broker until SIGTERM, then stop cleanly."""

from __future__ import annotations

import signal
import sys
import threading

from tidemq.broker.app import BrokerApp
from tidemq.broker.settings import BrokerSettings
from tidemq.common.settings import load_settings


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(BrokerSettings, argv, prog="python -m tidemq.broker")
    app = BrokerApp(settings)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    app.start()
    stop.wait()
    app.stop()


if __name__ == "__main__":
    main(sys.argv[1:])

"""A PushConsumer in its own process (so a test can SIGKILL it): appends consumed bodies to a file.

usage: python member_main.py NAMESRV GROUP TOPIC OUT_FILE SESSION_MS HEARTBEAT_MS
"""

from __future__ import annotations

import sys
import threading

from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer
from tidemq.common.stopsignal import StopSignal


def main(namesrv: str, group: str, topic: str, out: str, session_ms: str, heartbeat_ms: str):
    lock = threading.Lock()
    sink = open(out, "a", buffering=1)  # noqa: SIM115 - line-buffered, lives as long as we do

    def listener(messages):
        with lock:
            sink.write("".join(m.body.decode() + "\n" for m in messages))
        return ConsumeStatus.CONSUME_SUCCESS

    stop = StopSignal().install()
    with PushConsumer(namesrv, group, topic, listener, consume_from=ConsumeFrom.FIRST,
                      session_timeout_ms=int(session_ms), heartbeat_interval_ms=int(heartbeat_ms),
                      auto_commit_interval_s=0.5, long_poll_s=2.0, concurrency=4):
        stop.wait()


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The floor under the HTTP gateway: a bare Flask app served by the gateway's own gunicorn set-up
(tidemq.gateway.server.GatewayApplication with the same settings, so the same workers, gthread
threads, keep-alive and timeouts), answering the gateway's pop and batch-ack routes with the
same JSON shapes and no broker behind them.

    python -m bench.http_gateway.bare_app --port 0 --workers 2 [any gateway flag]

`POST /v1/groups/<group>/topics/<topic>/pop` decodes its JSON body and answers `max` messages
shaped like the gateway's (256-byte bodies, a receipt handle each), built per request as the
gateway builds them; `POST .../ack` decodes `{"receipt_handles": [...]}` and answers one result
per handle. Nothing else runs per request: no validation, tracing, metrics or logging.
"""

from __future__ import annotations

import sys
import time

from flask import Flask, jsonify, request

BODY = "x" * 256


def create_bare_app() -> Flask:
    app = Flask("bench.bare")
    app.json.sort_keys = False

    @app.post("/v1/groups/<group>/topics/<topic>/pop")
    def pop(group: str, topic: str):
        wanted = (request.get_json(silent=True) or {}).get("max", 16)
        now = int(time.time() * 1000)
        return jsonify({"messages": [{
            "body": BODY, "tag": "", "keys": [], "properties": {}, "queue_offset": index,
            "msg_id": f"7F00000100002A9F{index:016X}", "unique_id": f"{index:032X}",
            "born_timestamp": now, "store_timestamp": now, "reconsume_times": 0,
            "message_group": "", "topic": topic, "broker_name": "broker-a",
            "receipt_handle": f"WzEsImJyb2tlci1hIiwwLCJCZW5jaEh0dHAiLDAs{index:04d}",
            "delivery_count": 1,
        } for index in range(wanted)]})

    @app.post("/v1/groups/<group>/topics/<topic>/ack")
    def ack(group: str, topic: str):
        handles = request.get_json()["receipt_handles"]
        return jsonify({"results": [{"receipt_handle": handle, "acked": True, "code": "",
                                     "detail": ""} for handle in handles]})

    return app


def main(argv: list[str] | None = None) -> int:
    from tidemq.common.settings import load_settings
    from tidemq.gateway.server import GatewayApplication, prepare_metrics_dir
    from tidemq.gateway.settings import GatewaySettings

    prepare_metrics_dir()
    settings = load_settings(GatewaySettings, argv, prog="python -m bench.http_gateway.bare_app")

    class BareApplication(GatewayApplication):
        def load(self):
            return create_bare_app()

        def _post_fork(self, arbiter, worker) -> None:
            pass  # no tracing, no logging set-up: the floor

        def _worker_exit(self, arbiter, worker) -> None:
            pass

    BareApplication(settings).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The job submitter as a process: healthy only while the master lists enough ALIVE workers,
the job run once when they are, its outcome in /jobs. The master's side is Spark's `/json/`
document (the one Spark's own master serves), served here from a plain HTTP server so no JVM
starts; tests/integration/analytics/test_standalone.py runs it against a real cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.processes import free_port, wait_until


class MasterJson(BaseHTTPRequestHandler):
    workers: list[dict] = []

    def do_GET(self):  # noqa: N802
        body = json.dumps({"workers": self.workers, "aliveworkers": len(self.workers)}).encode()
        self.send_response(200 if self.path == "/json/" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def master():
    server = ThreadingHTTPServer(("127.0.0.1", 0), MasterJson)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    MasterJson.workers = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_the_job_runs_once_when_the_workers_are_alive(master, tmp_path):
    port, marker = free_port(), tmp_path / "ran"
    job = ["--", sys.executable, "-c",
           f"import sys; open({str(marker)!r}, 'a').write(sys.argv[1] + '\\n')", "{master}"]
    process = subprocess.Popen(
        [sys.executable, "-m", "tidemq.analytics.submitter", "--master", "spark://m:7077",
         "--master-ui", master, "--workers", "2", "--port", str(port), *job])
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: status(f"{base}/healthz") == 503, 20, message="submitter serving")
        MasterJson.workers = [{"state": "ALIVE"}, {"state": "DEAD"}]
        assert status(f"{base}/healthz") == 503 and not marker.exists()
        MasterJson.workers = [{"state": "ALIVE"}, {"state": "ALIVE"}]
        wait_until(lambda: status(f"{base}/healthz") == 200, 20, message="healthy")
        runs = wait_until(lambda: [r for r in json.load(urllib.request.urlopen(f"{base}/jobs"))
                                   ["runs"] if r["returncode"] is not None], 20,
                          message="the job finished")
        assert [r["returncode"] for r in runs] == [0]
        assert marker.read_text() == "spark://m:7077\n"   # {master} replaced, run once
        MasterJson.workers = []
        assert status(f"{base}/healthz") == 503
    finally:
        process.terminate()
        process.wait(10)

"""Property-based fuzzing of the HTTP gateway from its own OpenAPI document (schemathesis),
against real processes: Redis, config center, two name servers, one broker group and the
gateway under gunicorn. Every generated request, valid or not, must get an answer the document
declares (status code, content type, body schema) and never a 5xx. The same with auth on:
tests/integration/security/test_secure_gateway.py.

Derandomized, so CI is repeatable; `FUZZ_EXAMPLES=200 pytest tests/e2e/test_http_fuzz.py`
explores further."""

from __future__ import annotations

import os

import pytest
import requests
from schemathesis import GenerationMode

from tests.support.cluster import running_cluster
from tests.support.fuzz import fuzz_every_operation

pytestmark = pytest.mark.slow
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    # Its own cluster, not a shared one: generated requests create and delete what they like.
    with running_cluster(tmp_path_factory.mktemp("fuzz"), broker_names=("broker-a",)) as cluster:
        # Short long polls: the fuzzer's wait_ms values must not hold each request for seconds.
        cluster.start_gateway(workers=2, extra=["--max-pull-wait-ms", "50"])
        base = cluster.gateway_url
        created = requests.post(f"{base}/v1/topics", json={"name": "fuzz", "queues": 2},
                                timeout=30)
        assert created.status_code == 201, created.text
        yield base


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_answer_is_declared_and_none_is_a_server_error(gateway_url, mode):
    document = requests.get(f"{gateway_url}/openapi.json", timeout=30).json()
    operations, failures = fuzz_every_operation(document, gateway_url, mode, EXAMPLES)
    assert operations > 20, "the OpenAPI document lost its operations"
    assert not failures, "\n\n".join(failures)

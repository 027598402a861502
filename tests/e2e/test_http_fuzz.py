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
from tests.support.fuzz import ALL_CHECKS, fuzz_every_operation

pytestmark = pytest.mark.slow
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
# Checks of `--checks all` left out for an operation, each with why: {(operation, check): why}.
ACCEPTED = "positive_data_acceptance"
# A request the document cannot tell from a valid one, for a principled reason:
PRINCIPLED = {
    # opaque tokens the server minted: any string fits the schema, few strings are tokens
    ("POST /v1/groups/{group}/topics/{topic}/ack", ACCEPTED): "a receipt handle is minted "
        "by a pop: a string of the right shape is still not one",
    ("POST /v1/groups/{group}/topics/{topic}/invisible", ACCEPTED): "receipt handle, as ack",
    ("POST /v1/topics/{topic}/recall", ACCEPTED): "a recall handle is minted by a delayed send",
    # the store's state: a revision later than the store's newest is refused (400)
    ("GET /v1/config/{key}", ACCEPTED): "revision beyond the store's current one",
    # relations between query parameters: OpenAPI parameters are described one at a time
    ("GET /v1/topics/{topic}/messages", ACCEPTED): "end_ms must be after begin_ms",
    ("GET /v1/topics/{topic}/queues/{broker_name}/{queue_id}/messages", ACCEPTED):
        "tag and filter are two spellings of one expression: give one",
    ("POST /v1/groups/{group}/topics/{topic}/pop", ACCEPTED):
        "tag and filter are two spellings of one expression: give one",
    ("PATCH /v1/groups/{name}", ACCEPTED): "the body's name must equal the path's",
    # Python's str.isprintable (Unicode categories) has no JSON Schema pattern: no \p{} there
    ("POST /v1/topics/{topic}/messages", ACCEPTED): "message_group must be printable",
}
EXCLUDED: dict[tuple[str, str], str] = PRINCIPLED


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
    operations, failures = fuzz_every_operation(document, gateway_url, mode, EXAMPLES,
                                                wanted=ALL_CHECKS, excluded=EXCLUDED)
    assert operations > 20, "the OpenAPI document lost its operations"
    assert not failures, "\n\n".join(failures)

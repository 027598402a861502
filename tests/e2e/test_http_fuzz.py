"""Property-based fuzzing of the HTTP gateway from its own OpenAPI document (schemathesis),
against real processes: Redis, config center, two name servers, one broker group and the
gateway under gunicorn. Every generated request, valid or not, must get an answer the document
declares (status code, content type, body schema) and never a 5xx.

Derandomized, so CI is repeatable; `FUZZ_EXAMPLES=200 pytest tests/e2e/test_http_fuzz.py`
explores further."""

from __future__ import annotations

import os

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.core.failures import FailureGroup

from tests.support.cluster import running_cluster

pytestmark = pytest.mark.slow
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def gateway_api(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("fuzz"), broker_names=("broker-a",)) as cluster:
        # Short long polls: the fuzzer's wait_ms values must not hold each request for seconds.
        cluster.start_gateway(workers=2, extra=["--max-pull-wait-ms", "50"])
        base = cluster.gateway_url
        created = requests.post(f"{base}/v1/topics", json={"name": "fuzz", "queues": 2},
                                timeout=30)
        assert created.status_code == 201, created.text
        yield schemathesis.openapi.from_url(f"{base}/openapi.json")


CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_answer_is_declared_and_none_is_a_server_error(gateway_api, mode):
    failures: list[str] = []
    operations = [result.ok() for result in gateway_api.get_all_operations()]
    assert len(operations) > 20, "the OpenAPI document lost its operations"
    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case):
            case.call_and_validate(timeout=30, checks=CHECKS)

        try:
            fuzz()
        except Unsatisfiable:  # nothing to make invalid (no parameters, or only free strings)
            assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid request"
        except (Exception, FailureGroup) as exc:  # one operation's must not hide the others'
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)

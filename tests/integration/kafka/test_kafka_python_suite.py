"""kafka-python 3.0.12's own integration suite (from its PyPI sdist) against a TideMQ cluster
with gateway-kafka, as `make kafka-conformance` runs it (conformance/run.py): green means every
test passes except those in conformance/expected_failures.txt, which must fail (strict)."""

from __future__ import annotations

import pytest

from tests.integration.kafka.conformance.run import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_kafka_pythons_own_integration_suite(tmp_path):
    assert run(["-p", "no:warnings"], basetemp=tmp_path) == 0

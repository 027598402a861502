"""What gateway-kafka answers a Produce whose send failed: Kafka clients decide from the code
whether the batch may have been stored (retry under the same sequence) or not (re-number it
after an epoch bump), so a failure that may have reached a broker must never read as "not
stored", and a retriable refusal never as a permanent one (UNKNOWN_SERVER_ERROR)."""

from __future__ import annotations

import pytest
from tidemq.common import errors
from tidemq.gatewaykafka import codec
from tidemq.gatewaykafka.handlers import PRODUCE_CODES, kafka_code


@pytest.mark.parametrize(("error", "kafka"), [
    (errors.ServiceUnavailable("wire connection lost"), "REQUEST_TIMED_OUT"),
    (errors.TideMQError("circuit open", code="CIRCUIT_OPEN"), "REQUEST_TIMED_OUT"),
    (errors.PreconditionFailed("stored, not confirmed", code="NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
     "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
    (errors.PreconditionFailed("not master", code="NOT_MASTER"), "NOT_LEADER_OR_FOLLOWER"),
    (errors.PreconditionFailed("waiting", code="GROUP_HAS_NO_MASTER"),
     "NOT_LEADER_OR_FOLLOWER"),
    (errors.PreconditionFailed("gap", code="OUT_OF_ORDER_SEQUENCE_NUMBER"),
     "OUT_OF_ORDER_SEQUENCE_NUMBER"),
])
def test_a_failed_send_answers_what_the_client_must_assume(error, kafka):
    assert kafka_code(error, PRODUCE_CODES) == codec.ERRORS[kafka]

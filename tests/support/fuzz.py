"""Schemathesis over an OpenAPI document, one operation at a time: every generated request
must get an answer the document declares (status, content type, body schema), never a 5xx.
Used for the HTTP gateway with auth off (tests/e2e) and on (tests/integration/security)."""

from __future__ import annotations

import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.core.failures import FailureGroup

# Answers conform to the document (what the secure gateway's fuzzing asks).
CONFORMANCE = [checks.not_a_server_error, checks.status_code_conformance,
               checks.content_type_conformance, checks.response_schema_conformance]
checks.load_all_checks()
# `--checks all`: also valid data accepted, invalid data rejected, headers, methods, auth.
ALL_CHECKS = checks.CHECKS.get_all()


def checks_for(label: str, wanted: list, excluded: dict[tuple[str, str], str]) -> list:
    """`wanted` but those `excluded` for this operation: {(label or "*", check name): why}."""
    return [_empty_is_absent(check) if check is checks.negative_data_rejection else check
            for check in wanted
            if (label, check.__name__) not in excluded and ("*", check.__name__) not in excluded]


# Rejections by the HTTP server in front of the app (gunicorn): a request line or headers over
# its limits are refused before any view sees them, with a status schemathesis does not list.
SERVER_REJECTIONS = {414, 431}


def _empty_is_absent(check):
    """negative_data_rejection, except for a request that sends an optional query parameter
    empty (`?limit=`): the gateway takes that as the parameter left out, by design
    (tidemq.gateway.schema.QueryParameters), so accepting it is no violation; and a request
    gunicorn refused as too long was rejected."""
    def rejected_unless_empty(ctx, response, case):
        if response.status_code in SERVER_REJECTIONS:
            return None
        if any(value == "" for value in (case.query or {}).values()):
            return None
        return check(ctx, response, case)

    rejected_unless_empty.__name__ = check.__name__
    return rejected_unless_empty


def fuzz_every_operation(document: dict, base_url: str, mode: GenerationMode, examples: int,
                         *, session: requests.Session | None = None,
                         headers: dict[str, str] | None = None,
                         verify: bool | str = True,
                         wanted: list | None = None,
                         excluded: dict[tuple[str, str], str] | None = None,
                         ) -> tuple[int, list[str]]:
    """(operations fuzzed, one failure text per operation that failed). Derandomized: the
    same document gives the same requests. `verify`: the CA file of an HTTPS gateway.
    `wanted`: the checks (CONFORMANCE unless told); `excluded`: checks left out for an
    operation, each with its reason (checks_for)."""
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    for operation in operations:
        operation_checks = checks_for(operation.label, wanted or CONFORMANCE, excluded or {})

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case):
            case.call_and_validate(base_url=base_url, session=session, headers=headers,
                                   timeout=30, verify=verify,
                                   checks=operation_checks)  # noqa: B023 (run at once)

        try:
            fuzz()
        except Unsatisfiable:  # nothing to make invalid (no parameters, or only free strings)
            if mode is not GenerationMode.NEGATIVE:
                failures.append(f"{operation.label}: no valid request could be generated")
        except (Exception, FailureGroup) as exc:  # one operation's must not hide the others'
            failures.append(f"{operation.label}: {exc}")
    return len(operations), failures

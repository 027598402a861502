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

CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance]


def fuzz_every_operation(document: dict, base_url: str, mode: GenerationMode, examples: int,
                         *, session: requests.Session | None = None,
                         headers: dict[str, str] | None = None,
                         verify: bool | str = True) -> tuple[int, list[str]]:
    """(operations fuzzed, one failure text per operation that failed). Derandomized: the
    same document gives the same requests. `verify`: the CA file of an HTTPS gateway."""
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case):
            case.call_and_validate(base_url=base_url, session=session, headers=headers,
                                   timeout=30, verify=verify, checks=CHECKS)

        try:
            fuzz()
        except Unsatisfiable:  # nothing to make invalid (no parameters, or only free strings)
            if mode is not GenerationMode.NEGATIVE:
                failures.append(f"{operation.label}: no valid request could be generated")
        except (Exception, FailureGroup) as exc:  # one operation's must not hide the others'
            failures.append(f"{operation.label}: {exc}")
    return len(operations), failures

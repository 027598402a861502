"""The one problem+json renderer of the HTTP services (gateway, trace collector)."""

from __future__ import annotations

from tidemq.common import errors
from tidemq.common.problems import problem_for
from werkzeug.exceptions import MethodNotAllowed, NotFound


def test_a_tidemq_error_keeps_its_code_and_status():
    status, body, headers = problem_for(errors.TopicNotExist("topic 'x' does not exist"))
    assert status == 404 and body["code"] == "TOPIC_NOT_EXIST" and headers == {}
    assert body["type"].endswith("/topic-not-exist") and body["detail"] == "topic 'x' does not exist"


def test_http_errors_take_the_same_shape():
    status, body, _ = problem_for(NotFound())
    assert (status, body["code"], body["title"]) == (404, "NOT_FOUND", "Not Found")
    status, body, headers = problem_for(MethodNotAllowed(valid_methods=["GET", "POST"]))
    assert (status, body["code"], headers["Allow"]) == (405, "METHOD_NOT_ALLOWED", "GET, POST")


def test_anything_else_is_a_500_that_leaks_nothing():
    status, body, _ = problem_for(RuntimeError("secret detail"))
    assert (status, body["code"]) == (500, "INTERNAL_ERROR") and "secret" not in body["detail"]


def test_a_resource_exhausted_refusal_says_when_to_ask_again():
    status, body, headers = problem_for(
        errors.ResourceExhausted("every slot taken", code="LONG_POLLS_EXHAUSTED"))
    assert (status, body["code"], headers) == (429, "LONG_POLLS_EXHAUSTED", {"Retry-After": "1"})

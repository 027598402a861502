"""Assertions on the HTTP gateway's answers, shared by the end-to-end tests."""

from __future__ import annotations

import requests


def problem(response: requests.Response, status: int, code: str) -> dict:
    """The response is an RFC 9457 problem with this status and code (and a sentence)."""
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code and body["status"] == status and body["detail"]
    return body

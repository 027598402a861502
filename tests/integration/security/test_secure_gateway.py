"""The HTTP gateway with auth and HTTPS on (#16): 401 / 403 as problem+json, the same HMAC
headers as gRPC or a bearer token derived from the credentials, health open."""

from __future__ import annotations

import time

import pytest
import requests
from tidemq.common.auth.acl import Rule, User
from tidemq.common.auth.bearer import make_token
from tidemq.common.auth.signature import Credentials, signed_metadata
from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient

from tests.integration.security.conftest import TOPIC, secure_env
from tests.support.http import problem
from tests.support.processes import wait_until

CAROL = Credentials("carol", "carol-secret")  # may PUB to TOPIC
DAN = Credentials("dan", "dan-secret")  # no rules


@pytest.fixture(scope="module")
def gateway(secure_cluster, cert_dir):
    admin = AclAdmin(ConfigClient(secure_cluster.config_center.addr))
    for creds in (CAROL, DAN):
        admin.add_user(User(creds.access_key, creds.secret_key))
    admin.add_rule(Rule.create("carol-pub", "carol", f"topic:{TOPIC}", ["PUB"]))
    gateway = secure_cluster.start("tidemq.gateway", [
        "--namesrv-addrs", secure_cluster.namesrv_addrs,
        "--config-center", secure_cluster.config_center.addr, "--workers", "1",
    ], env=secure_env(cert_dir))
    url = f"https://127.0.0.1:{gateway.port}"
    session = requests.Session()
    session.verify = str(cert_dir / "ca.pem")
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override session.verify
    wait_until(lambda: _send(session, url, _signed(CAROL)).status_code == 201, 30,
               message="carol's rule to reach the gateway")
    return session, url


def _signed(credentials: Credentials, **kwargs) -> dict[str, str]:
    return dict(signed_metadata(credentials, **kwargs))


def _send(session: requests.Session, url: str, headers: dict) -> requests.Response:
    return session.post(f"{url}/v1/topics/{TOPIC}/messages", headers=headers, timeout=10,
                        json={"messages": [{"body": "hello"}]})


def test_health_and_openapi_need_no_credentials(gateway):
    session, url = gateway
    assert session.get(f"{url}/healthz", timeout=10).status_code == 200
    spec = session.get(f"{url}/openapi.json", timeout=10).json()
    send = spec["paths"]["/v1/topics/{topic}/messages"]["post"]["responses"]
    assert {"401", "403"} <= set(send)


@pytest.mark.parametrize("headers", [
    {},
    _signed(Credentials("carol", "guessed")),
    {"Authorization": "Bearer " + make_token(CAROL, ttl_s=-10)},
    {"Authorization": "Bearer not-a-token"},
], ids=["none", "wrong-signature", "expired-bearer", "malformed-bearer"])
def test_bad_credentials_are_401_problems(gateway, headers):
    session, url = gateway
    response = _send(session, url, headers)
    problem(response, 401, "UNAUTHENTICATED")
    assert "Bearer" in response.headers["WWW-Authenticate"]


def test_missing_permission_is_403_naming_resource_and_action(gateway):
    session, url = gateway
    body = problem(_send(session, url, _signed(DAN)), 403, "PERMISSION_DENIED")
    assert f"PUB on topic '{TOPIC}'" in body["detail"]
    body = problem(session.post(f"{url}/v1/topics", json={"name": "dan-topic", "queues": 1},
                                headers={"Authorization": "Bearer " + make_token(CAROL)},
                                timeout=10), 403, "PERMISSION_DENIED")
    assert "ADMIN on topic" in body["detail"]


def test_bearer_token_and_signature_both_work(gateway):
    session, url = gateway
    assert _send(session, url, _signed(CAROL)).status_code == 201
    token = make_token(CAROL, ttl_s=600, now=time.time())
    assert _send(session, url, {"Authorization": f"Bearer {token}"}).status_code == 201


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_fuzzing_with_auth_on_finds_only_declared_answers(gateway, mode):
    """Schemathesis over the OpenAPI document as carol (may PUB to one topic, nothing else):
    what she may not do is a declared 403, and nothing is a 5xx or undeclared."""
    from schemathesis import GenerationMode

    from tests.support.fuzz import fuzz_every_operation

    session, url = gateway
    document = session.get(f"{url}/openapi.json", timeout=10).json()
    operations, failures = fuzz_every_operation(
        document, url, GenerationMode(mode), 8, session=session, verify=session.verify,
        headers={"Authorization": f"Bearer {make_token(CAROL)}"})
    assert operations > 20
    assert not failures, "\n\n".join(failures)


def test_console_login_keeps_a_token_cookie_that_only_console_pages_accept(gateway):
    session, url = gateway
    browser = requests.Session()
    browser.verify, browser.trust_env = session.verify, False
    page = browser.get(f"{url}/console/topics", allow_redirects=False, timeout=10)
    assert page.status_code == 302
    assert page.headers["Location"].endswith("/console/login?next=/console/topics?")
    login = {"access_key": "carol", "secret_key": "guessed", "next": "/console/topics"}
    wrong = browser.post(f"{url}/console/login", data=login, timeout=10)
    assert wrong.status_code == 401 and "wrong access key or secret key" in wrong.text
    elsewhere = {**login, "secret_key": CAROL.secret_key, "next": "//evil.example/console/"}
    done = browser.post(f"{url}/console/login", data=elsewhere, allow_redirects=False,
                        timeout=10)
    assert done.status_code == 302 and done.headers["Location"] == "/console/cluster"
    cookie = done.headers["Set-Cookie"]
    assert {"HttpOnly", "SameSite=Strict", "Secure", "Path=/console"} <= {
        part.strip() for part in cookie.split(";")}
    assert CAROL.secret_key not in cookie
    topics = browser.get(f"{url}/console/topics", timeout=10)
    assert topics.status_code == 200 and TOPIC in topics.text and "Log out" in topics.text
    token = browser.cookies.get("tidemq_console")
    problem(browser.get(f"{url}/v1/topics", headers={"Cookie": f"tidemq_console={token}"},
                        timeout=10), 401, "UNAUTHENTICATED")  # never a credential of the API
    out = browser.post(f"{url}/console/logout", headers={"Origin": url}, allow_redirects=False,
                       timeout=10)
    assert out.status_code == 302 and not browser.cookies.get("tidemq_console")
    assert browser.get(f"{url}/console/topics", allow_redirects=False,
                       timeout=10).status_code == 302

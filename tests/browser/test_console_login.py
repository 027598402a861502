"""The console's login in headless Chromium, against a gateway with auth and HTTPS on (a real
secure cluster: ACL in the config center, TLS everywhere): a page asked without credentials
leads to the login form, a wrong secret is refused, the right one lands on the page asked
for with the user's view, the token cookie is HttpOnly, SameSite=Strict and Secure, and
"Log out" ends it."""

from __future__ import annotations

import pytest
import requests
from tidemq.common import rpc
from tidemq.common.auth.acl import User
from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient

from deploy import certs
from tests.browser.conftest import steady_navigation
from tests.integration.security.conftest import ADMIN, TOPIC, secure_env
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
ERIN = User("erin", "erin-secret")


@pytest.fixture(scope="module")
def console_url(tmp_path_factory):
    cert_dir = tmp_path_factory.mktemp("certs")
    certs.issue(cert_dir, "tidemq", certs.create_ca(cert_dir))
    env = secure_env(cert_dir)
    with running_cluster(tmp_path_factory.mktemp("secure-console"), env=env, controller=True,
                         broker_names=("broker-a",)) as cluster:
        rpc.configure_client_security(rpc.ClientSecurity(ADMIN, str(cert_dir / "ca.pem")))
        try:
            create_topic_in_config_center(cluster, TOPIC, 2)
            wait_for_route(cluster, TOPIC, 1)
            AclAdmin(ConfigClient(cluster.config_center.addr)).add_user(ERIN)
            gateway = cluster.start("tidemq.gateway", [
                "--namesrv-addrs", cluster.namesrv_addrs,
                "--config-center", cluster.config_center.addr, "--workers", "1"], env=env)
            url = f"https://127.0.0.1:{gateway.port}"
            wait_until(lambda: requests.get(f"{url}/healthz", verify=str(cert_dir / "ca.pem"),
                                            timeout=5).status_code == 200, 30,
                       message="the HTTPS gateway to answer")
            yield url
        finally:
            rpc.configure_client_security(rpc.ClientSecurity.from_env())


@pytest.fixture
def page(browser, screenshots):
    context = browser.new_context(ignore_https_errors=True)  # the test CA is not the system's
    page = context.new_page()
    steady_navigation(page)
    page.set_default_timeout(20_000)
    yield page
    page.screenshot(path=str(screenshots / "last.png"), full_page=True)
    context.close()


def log_in(page, secret: str):
    page.fill("input[name=access_key]", ERIN.access_key)
    page.fill("input[name=secret_key]", secret)
    with page.expect_navigation():
        page.click("form.login button[type=submit]")


def test_a_login_leads_to_the_page_asked_for_and_a_logout_ends_it(console_url, page):
    page.goto(f"{console_url}/console/topics")
    assert page.url.startswith(f"{console_url}/console/login?next=")
    log_in(page, "guessed")
    assert "wrong access key or secret key" in page.inner_text("main")
    log_in(page, ERIN.secret_key)
    assert page.url == f"{console_url}/console/topics"
    assert TOPIC in page.inner_text("main")
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "tidemq_console"]
    assert (cookie["httpOnly"], cookie["secure"], cookie["sameSite"], cookie["path"]) == (
        True, True, "Strict", "/console")
    assert ERIN.secret_key not in cookie["value"]
    with page.expect_navigation():
        page.click("form.logout button")
    assert page.url.startswith(f"{console_url}/console/login")
    assert not [c for c in page.context.cookies() if c["name"] == "tidemq_console"]
    page.goto(f"{console_url}/console/cluster")
    assert page.url.startswith(f"{console_url}/console/login?next=")

"""The secure profile's files: made once, private, and stable across runs (a second `make
up-secure` must not change the credential services and users already use)."""

from __future__ import annotations

import stat

from cryptography import x509

from deploy import certs, secure


def test_secure_env_is_created_once_and_kept(tmp_path):
    first = secure.secure_env(tmp_path)
    assert first["TIDEMQ_AUTH_ENABLED"] == "true" and len(first["TIDEMQ_SECRET_KEY"]) >= 32
    assert first["TIDEMQ_TRACE_UI_URL"].startswith("https://")  # the dashboard serves TLS
    env_file = tmp_path / secure.ENV_FILE.name
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ca-key.pem").stat().st_mode) == 0o600
    ca_before = (tmp_path / "ca.pem").read_bytes()
    assert secure.secure_env(tmp_path) == first
    assert (tmp_path / "ca.pem").read_bytes() == ca_before


def test_certificates_name_the_service_and_local_addresses(tmp_path):
    ca = certs.create_ca(tmp_path)
    cert = x509.load_pem_x509_certificate(certs.issue(tmp_path, "broker-a", ca).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"broker-a", "localhost"} <= set(names.get_values_for_type(x509.DNSName))
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    cert.verify_directly_issued_by(ca[0])

"""The secure profile's files: made once, private, and stable across runs (a second `make
up-secure` must not change the credential services and users already use)."""

from __future__ import annotations

import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from deploy import certs, secure
from deploy.local import DeployError, LocalDeployment
from deploy.render import render_supervisor
from deploy.secure_store import ETCD_USER, ROOT_USER, StoreSecurity
from deploy.topology import Placement, load


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
    cert = x509.load_pem_x509_certificate(certs.issue(tmp_path, "broker-a-0", ca).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"broker-a-0", "localhost"} <= set(names.get_values_for_type(x509.DNSName))
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    cert.verify_directly_issued_by(ca[0])


def test_the_stores_material_is_made_once_private_and_named_in_secure_env(tmp_path):
    env = secure.secure_env(tmp_path)
    store = StoreSecurity.from_env(env)
    assert store is not None and store.directory == (tmp_path / "store").resolve()
    files = [p for p in store.directory.rglob("*") if p.is_file()]
    secrets_ = [store.root_password_file, store.etcd_password_file, store.redis_password_file,
                store.redis_conf, store.encryption_key_file, store.config_center_pair[1],
                store.operator_pair[1], store.member_pair("etcd-1")[1]]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in secrets_)
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    before = {p: p.read_bytes() for p in files}
    assert secure.secure_env(tmp_path) == env
    assert {p: p.read_bytes() for p in files} == before  # passwords and keys are kept


def _cert(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_etcd_has_a_ca_of_its_own_and_no_certificate_is_named_after_an_etcd_user(tmp_path):
    secure.secure_env(tmp_path)
    store = StoreSecurity(tmp_path / "store")
    project_ca = _cert(tmp_path / "ca.pem")
    etcd_ca = _cert(store.etcd_ca)
    assert etcd_ca.subject != project_ca.subject
    for pair in (store.config_center_pair, store.operator_pair, store.member_pair("etcd-2")):
        cert = _cert(pair[0])
        cert.verify_directly_issued_by(etcd_ca)
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert cn not in (ETCD_USER, ROOT_USER)  # etcd would take a CN as that user
    with pytest.raises(ValueError):  # a service certificate is not the etcd CA's
        _cert(tmp_path / f"{secure.LOCAL_CERT}.pem").verify_directly_issued_by(etcd_ca)
    usages = _cert(store.redis_pair[0]).extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]  # never an etcd client


def test_make_up_secure_renders_every_store_credential_as_a_file_never_a_value(tmp_path):
    secure.secure_env(tmp_path)
    store = StoreSecurity(tmp_path / "store")
    topology = load()
    conf = render_supervisor(topology, Placement(), run_dir=tmp_path / "run",
                             data_dir=tmp_path / "data", security=store)
    for secret in (store.root_password(), store.etcd_password(), store.redis_password(),
                   *store.encryption_key_file.read_text().split(":")[1:]):
        assert secret.strip() and secret.strip() not in conf
    commands = {block.split("]")[0]: block for block in conf.split("[program:")[1:]}
    for member in topology.etcd_members():
        command = commands[member.name]
        assert "--listen-client-urls https://127.0.0.1:" in command
        assert "--initial-cluster etcd-1=https://" in command
        for flag in ("--client-cert-auth", "--peer-client-cert-auth"):
            assert flag in command
        assert f"--trusted-ca-file {store.etcd_ca}" in command
        assert f"--cert-file {store.member_pair(member.name)[0]}" in command
    for center in topology.members("config-center"):
        command = commands[center.name]
        assert f"--etcd-ca-file {store.etcd_ca}" in command
        assert f"--etcd-cert-file {store.config_center_pair[0]}" in command
        assert f"--etcd-user {ETCD_USER} --etcd-password-file {store.etcd_password_file}" \
            in command
        assert f"--store-encryption-key-file {store.encryption_key_file}" in command
    assert f" {store.redis_conf} " in commands["redis"] and " --port 0 --tls-port 6379 " \
        in commands["redis"]
    assert "--redis-url rediss://127.0.0.1:6379/0" in commands["gateway-http"]
    assert f"--redis-password-file {store.redis_password_file}" in commands["gateway-http"]
    # only the config centers are given the etcd credential and the encryption key
    for name, command in commands.items():
        if not name.startswith("config-center"):
            assert str(store.etcd_password_file) not in command
            assert str(store.encryption_key_file) not in command
            assert str(store.config_center_pair[1]) not in command
    plain = render_supervisor(topology, Placement(), run_dir=tmp_path / "run",
                              data_dir=tmp_path / "data")
    assert "--client-cert-auth" not in plain and "redis://127.0.0.1:6379/0" in plain


def test_the_store_data_of_one_profile_is_not_started_by_the_other(tmp_path):
    topology = load(etcd="single")
    (tmp_path / "etcd-1" / "member").mkdir(parents=True)
    secured = LocalDeployment(data_dir=tmp_path, topology=topology,
                              security=StoreSecurity(tmp_path / "store"))
    with pytest.raises(DeployError, match="made by the plain profile"):
        secured.check_store_profile()  # data from before (no mark) counts as plain
    LocalDeployment(data_dir=tmp_path, topology=topology).check_store_profile()
    (tmp_path / "etcd-profile").write_text("secure\n")
    with pytest.raises(DeployError, match=r"made by the secure profile \(make up-secure\)"):
        LocalDeployment(data_dir=tmp_path, topology=topology).check_store_profile()
    secured.check_store_profile()

"""Settings of the config-center process (see tidemq.common.settings for how they load)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting


@dataclass
class ConfigCenterSettings(ServiceSettings):
    """TideMQ config center: versioned KV, watches and leases on an etcd cluster."""

    port: int = setting(7070, "gRPC port (0 = pick a free port)")
    etcd_endpoints: str = setting("127.0.0.1:2379", "the etcd cluster's client endpoints, "
                                  "host:port,host:port,... (every member, so a lost one is "
                                  "skipped)")
    etcd_timeout_s: float = setting(2.0, "deadline of one etcd call: above etcd's election "
                                    "time (1 s by default), so a leader change is waited out, "
                                    "and below the clients' 3 s, so an outage answers "
                                    "UNAVAILABLE before they give up")
    etcd_ca_file: str = setting("", "CA bundle that signs the etcd members' certificates "
                                "(set: talk TLS to etcd)")
    etcd_cert_file: str = setting("", "client certificate for etcd's mutual TLS "
                                  "(--client-cert-auth)")
    etcd_key_file: str = setting("", "its private key")
    etcd_user: str = setting("", "etcd user (etcd authentication on); its password comes "
                             "from --etcd-password-file")
    etcd_password_file: str = setting("", "file holding the etcd user's password")
    store_encryption_key_file: str = setting(
        "", "key ring that encrypts secrets at rest (the ACL users' secret keys): one "
        "'<id>:<base64 32 bytes>' a line, the first the current key; re-read when it changes "
        "(docs/security.md#secrets-at-rest; \"\" = stored as written)")
    store_encryption_keys: str = setting(
        "", "the same key ring as text (lines or comma-separated), for the environment "
        "variable TIDEMQ_STORE_ENCRYPTION_KEYS; never put it on a command line")
    namespace: str = setting("", "prefix of every etcd key the config center uses (\"\" = "
                             "none: keys are stored as they are named, /tidemq/...)")
    max_watches: int = setting(192, "open Watch streams per instance; more answer "
                               "RESOURCE_EXHAUSTED (each holds a server thread)")
    watch_progress_s: float = setting(1.0, "how often a quiet watch reports the revision it "
                                      "has covered")

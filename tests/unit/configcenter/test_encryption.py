"""Secrets at rest (tidemq.configcenter.encryption): the key ring, sealing, rotation, and the
store sealing ACL users in a real etcd while plaintext written before stays readable."""

from __future__ import annotations

import base64
import json
import os

import grpc
import pytest
from tidemq.configcenter.encryption import (
    CannotDecrypt,
    KeyRing,
    KeyRingError,
    ValueCipher,
    new_key_line,
    parse_sealed,
    sealed,
)
from tidemq.etcd import rpc_pb2 as etcd
from tidemq.etcd import rpc_pb2_grpc as etcd_grpc

USER = "/tidemq/acl/users/alice"
SECRET = b"KNOWN-alice-secret-0123456789"
ALICE = json.dumps({"access_key": "alice", "secret_key": SECRET.decode(), "admin": False}).encode()


def _raw(shared_etcd, store, key: str) -> bytes:
    """The bytes etcd holds for a config-center key (past the store, straight to etcd)."""
    with grpc.insecure_channel(shared_etcd.endpoints.split(",")[0]) as channel:
        reply = etcd_grpc.KVStub(channel).Range(etcd.RangeRequest(key=store._key(key)),
                                                timeout=5)
    return reply.kvs[0].value


def test_a_sealed_value_opens_only_under_its_own_name_and_with_its_key():
    ring = KeyRing.parse(new_key_line("k1"))
    stored = ring.seal(USER, ALICE)
    assert sealed(stored) and SECRET not in stored and parse_sealed(stored)[0] == "k1"
    assert ring.open(USER, stored) == ALICE
    with pytest.raises(CannotDecrypt, match="moved from another key"):
        ring.open("/tidemq/acl/users/mallory", stored)  # copied to another user's key
    tampered = stored[:-6] + (b"AAAAAA" if not stored.endswith(b"AAAAAA") else b"BBBBBB")
    with pytest.raises(CannotDecrypt):
        ring.open(USER, tampered)
    with pytest.raises(CannotDecrypt, match="'k1', which is not in the key ring"):
        KeyRing.parse(new_key_line("k2")).open(USER, stored)


def test_the_first_key_seals_and_every_key_opens():
    old, new = new_key_line("old"), new_key_line("new")
    before = KeyRing.parse(old).seal(USER, ALICE)
    rotated = KeyRing.parse(f"# rotated\n{new}\n\n{old}\n")
    assert rotated.current == "new"
    assert rotated.open(USER, before) == ALICE
    assert parse_sealed(rotated.seal(USER, ALICE))[0] == "new"
    # one environment variable: comma-separated, either base64 alphabet
    key = base64.urlsafe_b64encode(b"\xfb" * 32).decode()
    assert KeyRing.parse(f"a:{key},{old}").current == "a"


@pytest.mark.parametrize("text, message", [
    ("", "holds no key"),
    ("nocolon", "is not '<key id>:<base64 key>'"),
    ("k1:c2hvcnQ=", "is 5 bytes; AES-256 needs 32"),
    ("k1:!!!!", "not base64"),
    (f"{new_key_line('k1')}\n{new_key_line('k1')}", "names a key id twice"),
], ids=["empty", "no colon", "short key", "not base64", "id twice"])  # ids: the keys are random
def test_a_bad_key_ring_is_refused_with_a_sentence_without_the_key(text, message):
    with pytest.raises(KeyRingError, match=message) as caught:
        KeyRing.parse(text)
    material = text.partition(":")[2].partition("\n")[0]
    assert not material or material not in str(caught.value)


def test_the_cipher_leaves_other_keys_and_plaintext_alone_and_reloads_its_file(tmp_path):
    key_file = tmp_path / "keys"
    key_file.write_text(new_key_line("k1") + "\n")
    cipher = ValueCipher(str(key_file))
    assert cipher.encrypt("/tidemq/topics/t", b"{}") == b"{}"          # not a secret
    assert cipher.decrypt(USER, ALICE) == ALICE                        # plaintext from before
    first = cipher.encrypt(USER, ALICE)
    assert parse_sealed(first)[0] == "k1"
    key_file.write_text(new_key_line("k2") + "\n" + key_file.read_text())
    os.utime(key_file, ns=(0, 10**18))  # a changed file, even within the clock's resolution
    assert parse_sealed(cipher.encrypt(USER, ALICE))[0] == "k2"
    assert cipher.decrypt(USER, first) == ALICE
    key_file.write_text("garbage")  # a broken file keeps the ring in force
    os.utime(key_file, ns=(0, 2 * 10**18))
    assert cipher.decrypt(USER, first) == ALICE
    # without the key a sealed value is answered as stored: readers skip it, nothing crashes
    assert ValueCipher().decrypt(USER, first) == first
    with pytest.raises(KeyRingError, match="not both"):
        ValueCipher(str(key_file), new_key_line())


def test_the_store_keeps_users_sealed_in_etcd_and_reads_plaintext_from_before(
        make_store, shared_etcd, tmp_path):
    key_file = tmp_path / "keys"
    key_file.write_text(new_key_line("k1") + "\n")
    plain = make_store()
    plain.put(USER, ALICE)  # written before encryption was on
    assert _raw(shared_etcd, plain, USER) == ALICE

    store = make_store(namespace=plain.namespace.decode(), cipher=ValueCipher(str(key_file)))
    kv, _ = store.get(USER)
    assert kv.value == ALICE  # the plaintext entry still loads
    store.put("/tidemq/topics/t", b'{"queues": 1}')
    assert _raw(shared_etcd, store, "/tidemq/topics/t") == b'{"queues": 1}'

    start = store.revision() + 1
    written = store.put(USER, ALICE, expected_mod_revision=kv.mod_revision)  # its next write
    assert written.succeeded and written.prev_kv.value == ALICE
    raw = _raw(shared_etcd, store, USER)
    assert SECRET not in raw and parse_sealed(raw)[0] == "k1"
    assert store.get(USER)[0].value == ALICE
    assert [kv.value for kv in store.range("/tidemq/acl/").kvs] == [ALICE]
    assert store.range_many(["/tidemq/acl/users/"])[0].kvs[0].value == ALICE
    events = [e for b in store.watch("/tidemq/acl/", start, until=written.revision)
              for e in b.events]
    assert [e.kv.value for e in events] == [ALICE]
    assert [e.kv.value for e in store.history(USER)] == [ALICE, ALICE]

    # rotation: a new first key seals the next write; rollback re-seals the old value
    key_file.write_text(new_key_line("k2") + "\n" + key_file.read_text())
    os.utime(key_file, ns=(0, 10**18))
    store.put(USER, b'{"access_key": "alice", "secret_key": "other", "admin": false}')
    rolled = store.rollback(USER, written.revision)
    raw = _raw(shared_etcd, store, USER)
    assert rolled.succeeded and parse_sealed(raw)[0] == "k2" and SECRET not in raw
    assert store.get(USER)[0].value == ALICE

"""Secrets at rest: the values the config center stores under `ENCRYPTED_PREFIXES` (the ACL
users, whose JSON holds each user's secret key) are written to etcd encrypted, and decrypted
when they are read back, so the store, its WAL and snapshots, and any backup of them hold no
secret in plaintext (docs/security.md#secrets-at-rest).

Only the config centers hold the keys, outside the store: a key-ring file
(`--store-encryption-key-file`) or the environment (`TIDEMQ_STORE_ENCRYPTION_KEYS`). Every
service that verifies signatures needs the plaintext secrets and reads them from a config
center over its authenticated (ADMIN-only, docs/security.md) and TLS-protected API, as before;
no other process needs the keys.

A key ring is one key a line, `<key id>:<base64 of 32 random bytes>` (`#` comments and blank
lines are skipped); the FIRST line is the current key, the one new writes use, and every line
still decrypts. A stored value is

    tmqenc1:<key id>:<base64url(12-byte nonce || AES-256-GCM ciphertext and tag)>

with the key's name as the associated data, so a ciphertext moved to another key does not
decrypt. A value without the `tmqenc1:` mark is plaintext written before encryption was on: it
reads as it is, and is encrypted by its next write (`tidemq acl rekey` rewrites every user).

Rotate: put a new line first (`python -m tidemq.configcenter.encryption new-key`) in every
config center's key ring (a file is re-read when it changes; the environment at a restart),
run `tidemq acl rekey`, then drop the old line once nothing is sealed with it.

    python -m tidemq.configcenter.encryption new-key [--id ID]   # print a new key-ring line
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import os
import re
import secrets
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from tidemq.common.auth.acl import USERS_PREFIX
from tidemq.common.errors import InvalidArgument
from tidemq.common.logs import get_logger

log = get_logger(__name__)

MARK = b"tmqenc1:"
ENCRYPTED_PREFIXES = (USERS_PREFIX,)  # the ACL users: {"access_key", "secret_key", "admin"}
KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class KeyRingError(InvalidArgument):
    """A key ring that cannot be used, with a sentence saying why (never the key)."""


class CannotDecrypt(ValueError):
    """A sealed value whose key is not in the ring, or that does not authenticate."""


@dataclass(frozen=True)
class KeyRing:
    """Keys by id; `current` seals new values, every one opens."""

    keys: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise KeyRingError("the key ring holds no key")
        ids = [key_id for key_id, _ in self.keys]
        if len(set(ids)) != len(ids):
            raise KeyRingError(f"the key ring names a key id twice ({', '.join(ids)})")

    @property
    def current(self) -> str:
        return self.keys[0][0]

    @classmethod
    def parse(cls, text: str, source: str = "key ring") -> KeyRing:
        """Lines (or comma-separated items, for one environment variable) `id:base64`."""
        keys = []
        for number, raw in enumerate(re.split(r"[\n,]", text), start=1):
            item = raw.strip()
            if not item or item.startswith("#"):
                continue
            key_id, sep, encoded = item.partition(":")
            if not sep or not _KEY_ID.fullmatch(key_id):
                raise KeyRingError(f"{source}: item {number} is not '<key id>:<base64 key>' "
                                   "(id: letters, digits, '_', '.', '-')")
            text = encoded.strip().replace("-", "+").replace("_", "/")  # either alphabet
            try:
                key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                raise KeyRingError(f"{source}: key {key_id!r} is not base64") from None
            if len(key) != KEY_BYTES:
                raise KeyRingError(f"{source}: key {key_id!r} is {len(key)} bytes; AES-256 "
                                   f"needs {KEY_BYTES} (make one with `python -m "
                                   "tidemq.configcenter.encryption new-key`)")
            keys.append((key_id, key))
        return cls(tuple(keys))

    def _key(self, key_id: str) -> bytes | None:
        return next((key for kid, key in self.keys if kid == key_id), None)

    def seal(self, name: str, value: bytes) -> bytes:
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = AESGCM(self.keys[0][1]).encrypt(nonce, value, name.encode("utf-8",
                                                                           "surrogatepass"))
        return MARK + self.current.encode() + b":" + base64.urlsafe_b64encode(nonce + sealed)

    def open(self, name: str, stored: bytes) -> bytes:
        key_id, blob = parse_sealed(stored)
        key = self._key(key_id)
        if key is None:
            raise CannotDecrypt(f"sealed with key {key_id!r}, which is not in the key ring")
        try:
            raw = base64.urlsafe_b64decode(blob)
            return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:],
                                       name.encode("utf-8", "surrogatepass"))
        except (binascii.Error, ValueError, InvalidTag):
            raise CannotDecrypt(f"does not decrypt with key {key_id!r} (altered, or moved "
                                "from another key)") from None


def sealed(stored: bytes) -> bool:
    return stored.startswith(MARK)


def parse_sealed(stored: bytes) -> tuple[str, bytes]:
    """(key id, base64 blob) of a sealed value."""
    key_id, sep, blob = stored[len(MARK):].partition(b":")
    if not sealed(stored) or not sep:
        raise CannotDecrypt("not a sealed value")
    return key_id.decode("ascii", "replace"), blob


def encrypted_key(name: str) -> bool:
    """Whether values of this config-center key are kept encrypted."""
    return name.startswith(ENCRYPTED_PREFIXES)


class ValueCipher:
    """What the store applies to values: seal on write, open on read, for the keys under
    ENCRYPTED_PREFIXES. Built from a key-ring file (re-read when it changes, so a rotation
    needs no restart) and/or key-ring text from the environment."""

    def __init__(self, key_file: str = "", keys: str = "") -> None:
        if key_file and keys:
            raise KeyRingError("give the key ring as --store-encryption-key-file or "
                               "TIDEMQ_STORE_ENCRYPTION_KEYS, not both")
        self.key_file = Path(key_file) if key_file else None
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._warned: set[tuple[str, str]] = set()
        self._ring = KeyRing.parse(keys, "TIDEMQ_STORE_ENCRYPTION_KEYS") if keys else None
        if self.key_file is not None:
            self._reload(first=True)

    @property
    def enabled(self) -> bool:
        return self.key_file is not None or self._ring is not None

    def describe(self) -> str:
        if not self.enabled:
            return "off"
        ring = self.ring()
        return f"AES-256-GCM, current key {ring.current!r}, {len(ring.keys)} key(s)"

    def _reload(self, first: bool = False) -> None:
        assert self.key_file is not None
        try:
            info = os.stat(self.key_file)
            stamp = (info.st_mtime_ns, info.st_size)
            if stamp == self._stamp:
                return
            if info.st_mode & 0o077:
                log.warning("the store encryption key file is readable by others: chmod 600",
                            file=str(self.key_file))
            ring = KeyRing.parse(self.key_file.read_text(), str(self.key_file))
        except (OSError, KeyRingError) as exc:
            if first:
                raise KeyRingError(f"store encryption key file: {exc}") from None
            log.error("store encryption key file not reloaded; the previous key ring stays",
                      file=str(self.key_file), error=str(exc))
            return
        if self._ring is not None and ring.current != self._ring.current:
            log.info("store encryption key ring reloaded", current=ring.current,
                     keys=len(ring.keys))
        self._ring, self._stamp = ring, stamp

    def ring(self) -> KeyRing:
        with self._lock:
            if self.key_file is not None:
                self._reload()
            assert self._ring is not None
            return self._ring

    def encrypt(self, name: str, value: bytes) -> bytes:
        if not self.enabled or not encrypted_key(name):
            return value
        return self.ring().seal(name, value)

    def decrypt(self, name: str, stored: bytes) -> bytes:
        """The plaintext; a plaintext value (written before encryption) as it is; a value
        that cannot be opened as stored (logged: readers then skip it as malformed)."""
        if not sealed(stored) or not encrypted_key(name):
            return stored
        if not self.enabled:
            self._warn(name, "no key ring: give the config center --store-encryption-key-file")
            return stored
        try:
            return self.ring().open(name, stored)
        except CannotDecrypt as exc:
            self._warn(name, str(exc))
            return stored

    def _warn(self, name: str, reason: str) -> None:
        with self._lock:
            if (name, reason) in self._warned:
                return
            self._warned.add((name, reason))
        log.error("cannot decrypt a stored secret; it is answered sealed", key=name,
                  reason=reason)


def new_key_line(key_id: str = "") -> str:
    key_id = key_id or "k" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    if not _KEY_ID.fullmatch(key_id):
        raise KeyRingError(f"key id {key_id!r}: letters, digits, '_', '.', '-' only")
    return f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tidemq.configcenter.encryption",
                                     description="Print a new key-ring line (put it FIRST in "
                                     "the key ring to make it the current key).")
    parser.add_argument("command", choices=["new-key"])
    parser.add_argument("--id", default="", help="key id (default: k<UTC time>)")
    args = parser.parse_args(argv)
    print(new_key_line(args.id))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

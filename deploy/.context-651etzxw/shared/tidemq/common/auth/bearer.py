"""Bearer tokens for HTTP clients that cannot sign each request: derived from the credentials.

    tmq1.<access key>.<expires, unix seconds>.<hex HMAC-SHA256(secret key, "tmq1.<access key>.<expires>")>

Anyone holding the secret key can mint one (`tidemq acl token`, or `make_token` below), and
the server checks it with the same secret, so nothing is stored per token. It expires (the
signed `expires`); revoking a user (or changing its secret) revokes its tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from tidemq.common.auth.signature import Credentials, SignatureError

VERSION = "tmq1"
DEFAULT_TTL_S = 24 * 3600


def _mac(secret_key: str, claim: str) -> str:
    return hmac.new(secret_key.encode(), claim.encode(), hashlib.sha256).hexdigest()


def make_token(credentials: Credentials, ttl_s: int = DEFAULT_TTL_S,
               now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + ttl_s)
    claim = f"{VERSION}.{credentials.access_key}.{expires}"
    return f"{claim}.{_mac(credentials.secret_key, claim)}"


def parse_token(token: str) -> tuple[str, int, str]:
    """(access key, expires, mac); raises SignatureError('malformed')."""
    parts = token.strip().split(".")
    if len(parts) < 4 or parts[0] != VERSION or not parts[-2].isdigit():
        raise SignatureError("malformed", f"the bearer token is not {VERSION}.<access key>."
                             "<expires>.<signature> (see docs/security.md)")
    return ".".join(parts[1:-2]), int(parts[-2]), parts[-1]


def verify_token(token: str, secret_key: str, now: float) -> None:
    access_key, expires, mac = parse_token(token)
    if not hmac.compare_digest(_mac(secret_key, f"{VERSION}.{access_key}.{expires}"), mac.lower()):
        raise SignatureError("bad_signature", f"the bearer token of access key {access_key!r} "
                             "does not match its secret")
    if now > expires:
        raise SignatureError("expired", f"the bearer token of access key {access_key!r} "
                             f"expired {now - expires:.0f} s ago")

"""Body compression codecs (docs/client.md: compress bodies over a threshold; zstd or none).

The codec name travels in the record's COMPRESSION property so a consumer never guesses.
"""

from __future__ import annotations

import threading

import zstandard
from tidemq.common.errors import InvalidArgument

ZSTD = "zstd"
NONE = "none"
CODECS = (ZSTD, NONE)

_local = threading.local()  # zstd contexts are not thread-safe; one pair per thread


def _zstd() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    pair = getattr(_local, "zstd", None)
    if pair is None:
        pair = (zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor())
        _local.zstd = pair
    return pair


def check_codec(codec: str) -> str:
    if codec not in CODECS:
        raise InvalidArgument(f"compression must be one of {CODECS}, got {codec!r}")
    return codec


def compress(body: bytes, codec: str) -> bytes:
    if codec == ZSTD:
        return _zstd()[0].compress(body)
    raise InvalidArgument(f"cannot compress with codec {codec!r}")


def decompress(body: bytes, codec: str) -> bytes:
    if codec == ZSTD:
        return _zstd()[1].decompress(body)
    if codec == NONE:
        return body
    raise InvalidArgument(f"message compressed with unknown codec {codec!r}")

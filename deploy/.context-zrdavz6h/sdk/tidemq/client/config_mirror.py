"""PrefixMirror, re-exported under the SDK's documented name (tidemq.configclient.mirror)."""

from tidemq.configclient.mirror import PrefixMirror  # noqa: F401

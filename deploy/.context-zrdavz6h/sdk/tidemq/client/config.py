"""The config-center client, re-exported under the SDK's documented name (tidemq.configclient)."""

from tidemq.configclient.client import *  # noqa: F403
from tidemq.configclient.client import __all__  # noqa: F401

"""Subscription-group definitions, re-exported under the SDK's documented name
(tidemq.configclient.groups)."""

from tidemq.configclient.groups import *  # noqa: F403

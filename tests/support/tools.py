"""Tests that need a program the machine may lack (docker-compose, etcd, promtool).

Locally such a test skips with the package to install. Under CI=true it runs anyway, and fails
on the missing program: `.ci/run` installs every tool the suite uses, so a skip there would be
a silent hole in what CI proves.
"""

from __future__ import annotations

import os
import shutil

import pytest

IN_CI = os.environ.get("CI") == "true"


def needs_tool(program: str, debian_package: str | None = None) -> pytest.MarkDecorator:
    """Skip when `program` is not on PATH, except under CI=true."""
    return pytest.mark.skipif(
        shutil.which(program) is None and not IN_CI,
        reason=f"{program} is not installed (Debian: apt-get install "
               f"{debian_package or program})")

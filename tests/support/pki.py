"""Certificates for TLS tests (deploy.certs, as `make certs` writes them) and file rotation the
way an operator does it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from deploy import certs


def new_pki(directory: Path, *names: str) -> Path:
    """A fresh CA in `directory` (`ca.pem`) and `<name>.pem` / `<name>-key.pem` it signed."""
    ca = certs.create_ca(directory)
    for name in names:
        certs.issue(directory, name, ca)
    return directory


def rotate(source: Path, target: Path) -> None:
    """Replace `target` with `source`'s bytes: a copy beside it, then a rename over it."""
    staging = target.with_name(target.name + ".staging")
    shutil.copyfile(source, staging)
    os.replace(staging, target)

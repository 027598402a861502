"""`make images`: build every image of the topology without reaching a container registry.

1. Base image: $TIDEMQ_BASE_IMAGE if set (e.g. python:3.11-slim-bookworm where a registry is
   reachable), else localhost/tidemq-base:bookworm made with debootstrap and `docker import`
   (the root file system tarball is cached under /var/cache/tidemq).
2. Wheelhouse: the locked third-party dependencies of each image, exported by uv and fetched
   as wheels on the host into deploy/.wheelhouse (reused while uv.lock and the C members are
   unchanged), the build backend, and the wheels of the members with C code (native/),
   compiled here, and uv's wheel (the host's uv version), so images install with
   `uv pip install --no-index` and need no compiler. Each image gets its own folder of them,
   deploy/.wheelhouse/images/<package>/ (hard links).
3. `docker build` of each image from a context of its own: its Dockerfile folder, its members'
   sources and its wheel folder, laid out as in the repo. The legacy builder sends the whole
   context for every build; the repo root's would carry every image's wheels (pyspark's 300 MB
   of jars among them) to each. The images are built side by side, with BuildKit where a
   docker client can drive it (see _build_command).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from deploy.render import HOST_BUILT_MEMBERS, image_ref, rendered_files
from deploy.topology import ALL_PROFILES, REPO_ROOT, Topology, enabled_profiles, load

LOCAL_BASE_IMAGE = "localhost/tidemq-base:bookworm"
CACHE_DIR = Path(os.environ.get("TIDEMQ_CACHE_DIR", "/var/cache/tidemq"))
WHEELHOUSE = REPO_ROOT / "deploy" / ".wheelhouse"
BACKEND_WHEELS = WHEELHOUSE / "backend"   # the build backend and its dependencies
BUILD_BACKEND = ["hatchling>=1.25"]  # the images build the member wheels with it
# Images built at once: each build alternates CPU (uv, bytecode, layer snapshots) with waits
# (apt's downloads, the engine's disk writes), so a 2-core machine keeps busy with three.
BUILD_JOBS = int(os.environ.get("TIDEMQ_BUILD_JOBS", "3"))
DEBOOTSTRAP_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"


class ImageBuildError(RuntimeError):
    pass


def _run(argv: list[str], **kwargs) -> None:
    print("+", " ".join(argv), flush=True)
    try:
        subprocess.run(argv, check=True, **kwargs)
    except subprocess.CalledProcessError as exc:
        raise ImageBuildError(f"command failed ({exc.returncode}): {' '.join(argv)}") from None


def _image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def base_image() -> str:
    return os.environ.get("TIDEMQ_BASE_IMAGE") or LOCAL_BASE_IMAGE


def ensure_base_image() -> str:
    """Make sure the base image exists locally; returns its reference."""
    ref = base_image()
    if ref != LOCAL_BASE_IMAGE or _image_exists(ref):
        return ref
    tarball = CACHE_DIR / "tidemq-base-bookworm.tar"
    if not tarball.exists():
        _debootstrap_tarball(tarball)
    with tarball.open("rb") as stream:
        _run(["docker", "import", "-", ref], stdin=stream)
    return ref


def _debootstrap_tarball(tarball: Path) -> None:
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise ImageBuildError(
            "the base image needs debootstrap run as root (`apt-get install debootstrap`), "
            "or set TIDEMQ_BASE_IMAGE=python:3.11-slim-bookworm where a registry is reachable"
        )
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tidemq-rootfs-") as rootfs:
        _run(
            ["debootstrap", "--variant=minbase", f"--include={DEBOOTSTRAP_PACKAGES}",
             "bookworm", rootfs],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        partial = tarball.with_suffix(".partial")
        with partial.open("wb") as out:
            _run(["tar", "-C", rootfs, "-c", "."], stdout=out)
        partial.rename(tarball)


def _built_images(topology: Topology) -> list:
    """The images of the services that run (a topology without the `analytics` profile never
    fetches pyspark and its 300 MB of jars)."""
    used = {s.image for s in topology.services.values()}
    return [image for image in topology.images.values()
            if image.name in used and image.upstream is None]


def _wheelhouse_key(topology: Topology) -> str:
    digest = hashlib.sha256((REPO_ROOT / "uv.lock").read_bytes())
    for image in _built_images(topology):
        digest.update(f"{image.name}:{image.package}".encode())
    digest.update(repr([*BUILD_BACKEND, _uv_requirement()]).encode())
    digest.update(b"per-image folders: images/<package>/")   # the layout _image_wheel_folder makes
    for member in sorted(HOST_BUILT_MEMBERS):   # their wheels are compiled into the wheelhouse
        for path in sorted((REPO_ROOT / member).rglob("*")):
            if path.is_file() and path.suffix in {".c", ".h", ".py", ".toml"}:
                digest.update(path.relative_to(REPO_ROOT).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_wheelhouse(topology: Topology) -> Path:
    """deploy/.wheelhouse: <package>.txt requirement files and every wheel they need."""
    stamp = WHEELHOUSE / ".stamp"
    key = _wheelhouse_key(topology)
    if stamp.exists() and stamp.read_text() == key:
        return WHEELHOUSE
    if sys.version_info[:2] != (3, 11):
        raise ImageBuildError("the wheelhouse is built with Python 3.11 (the images' Python)")
    BACKEND_WHEELS.mkdir(parents=True, exist_ok=True)
    requirement_files = []
    for image in _built_images(topology):
        if image.package is None:
            continue
        target = WHEELHOUSE / f"{image.package}.txt"
        _run(
            ["uv", "export", "--frozen", "--package", image.package, "--no-dev",
             "--no-emit-workspace", "--no-hashes", "--quiet", "-o", str(target)],
            cwd=REPO_ROOT,
        )  # fmt: skip
        requirement_files.append(target)
    fetch = WHEELHOUSE / "fetch.txt"
    fetch.write_text("\n".join(_target_requirements(requirement_files)) + "\n")
    pip_wheel = [*_pip_command(), "wheel", "--quiet", "--find-links", str(WHEELHOUSE),
                 "--find-links", str(BACKEND_WHEELS)]   # wheels fetched before are reused
    _run([*pip_wheel, "--wheel-dir", str(WHEELHOUSE), "--no-deps", "-r", str(fetch)])
    for stale in BACKEND_WHEELS.glob("uv-*.whl"):   # one uv wheel: the images unpack uv-*.whl
        stale.unlink()
    _run([*pip_wheel, "--wheel-dir", str(BACKEND_WHEELS), *BUILD_BACKEND, _uv_requirement()])
    for member, distribution in HOST_BUILT_MEMBERS.items():   # needs gcc and zlib headers
        for stale in WHEELHOUSE.glob(f"{distribution}-*.whl"):
            stale.unlink()
        _run([*pip_wheel, "--wheel-dir", str(WHEELHOUSE), "--no-deps", str(REPO_ROOT / member)])
    for image in _built_images(topology):
        if image.package is not None:
            _image_wheel_folder(image)
    stamp.write_text(key)
    return WHEELHOUSE


def _uv_requirement() -> str:
    """uv at the host's version: the images install with it (its wheel holds a static binary)."""
    try:
        answer = subprocess.run(["uv", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ImageBuildError(f"the wheelhouse needs uv on the host: {exc}") from None
    return f"uv=={answer.stdout.split()[1]}"


def _image_wheel_folder(image) -> Path:
    """deploy/.wheelhouse/images/<package>/: the wheels of the image's pins, the build backend's
    and uv's, those of its members with C code, and its requirements.txt; nothing another image
    needs."""
    by_pin = {}
    for wheel in WHEELHOUSE.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        by_pin[(name, version)] = wheel
    wanted = []
    requirements = WHEELHOUSE / f"{image.package}.txt"
    for pin in _target_requirements([requirements]):
        requirement = Requirement(pin)
        version = Version(next(iter(requirement.specifier)).version)   # an exact pin: ==
        wheel = by_pin.get((canonicalize_name(requirement.name), version))
        if wheel is None:
            raise ImageBuildError(f"{image.name}: no wheel for {pin} in {WHEELHOUSE}")
        wanted.append(wheel)
    wanted += BACKEND_WHEELS.glob("*.whl")
    for member in image.members:
        if member in HOST_BUILT_MEMBERS:
            wanted += WHEELHOUSE.glob(f"{HOST_BUILT_MEMBERS[member]}-*.whl")
    folder = WHEELHOUSE / "images" / image.package
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for wheel in wanted:
        _link(wheel, folder / wheel.name)
    shutil.copyfile(requirements, folder / "requirements.txt")
    return folder


def _link(source: Path, target: Path) -> None:
    """A hard link (the wheelhouse's files are never rewritten in place), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _target_requirements(requirement_files: list[Path]) -> list[str]:
    """Pinned requirements any image Python may need, whatever the host's patch release.

    Markers are evaluated for the images (Linux, CPython 3.11.x from 3.11.0 to the newest),
    not the host: bookworm's 3.11.2 needs async-timeout that a 3.11.7 host would skip."""
    wanted: set[str] = set()
    for path in requirement_files:
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "-")):
                continue
            pin, _, marker = line.partition(";")
            if not marker.strip() or any(
                Marker(marker).evaluate(env) for env in _IMAGE_MARKER_ENVIRONMENTS
            ):
                wanted.add(pin.strip())
    return sorted(wanted)


_IMAGE_MARKER_ENVIRONMENTS = [
    {"python_full_version": patch, "python_version": "3.11", "sys_platform": "linux",
     "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
     "platform_python_implementation": "CPython", "platform_machine": os.uname().machine}
    for patch in ("3.11.0", "3.11.2", "3.11.99")
]  # fmt: skip


def _pip_command() -> list[str]:
    """A Python 3.11 pip outside our venv (uv venvs have none), else pip run through uv."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
    for name in ("python3.11", "python3"):
        python = shutil.which(name, path=path)
        if python is None:
            continue
        probe = subprocess.run(
            [python, "-c", "import pip, sys; assert sys.version_info[:2] == (3, 11)"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return [python, "-m", "pip"]
    return ["uv", "tool", "run", "--python", "3.11", "pip"]


def build_images(topology: Topology | None = None) -> list[str]:
    """Build all images; returns their references."""
    topology = topology or load()
    rendered = rendered_files(load(profiles=ALL_PROFILES))
    stale = [p for p, text in rendered.items() if p.read_text() != text]
    if stale:
        raise ImageBuildError(f"run `python -m deploy.render` first; stale: {stale}")
    started = time.monotonic()
    base = ensure_base_image()
    print(f"base image {base} ready ({time.monotonic() - started:.0f} s)", flush=True)
    ensure_wheelhouse(topology)
    print(f"wheelhouse ready ({time.monotonic() - started:.0f} s)", flush=True)
    command = _build_command()
    built = _built_images(topology)   # not the pulled ones, nor those of idle profiles
    longest_first = sorted(built, key=_wheel_bytes, reverse=True)   # the most wheels
    with ThreadPoolExecutor(max_workers=max(1, BUILD_JOBS)) as pool:
        futures = [pool.submit(_build, image, command, base, started) for image in longest_first]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()
        for future in done:
            future.result()   # raises the failure, if one
    return [image_ref(image.name) for image in built]


def _wheel_bytes(image) -> int:
    if image.package is None:
        return 0
    return sum(p.stat().st_size for p in (WHEELHOUSE / "images" / image.package).iterdir())


def _build(image, command: list[str], base: str, started: float) -> None:
    """One `docker build`; its output is kept, and shown when it fails (builds run at once)."""
    ref = image_ref(image.name)
    with tempfile.TemporaryDirectory(dir=WHEELHOUSE.parent, prefix=".context-") as context:
        _stage_context(image, Path(context))
        argv = [*command, "-t", ref, "-f", f"{image.dockerfile_dir}/Dockerfile",
                "--build-arg", f"BASE_IMAGE={base}", "."]  # fmt: skip
        print("+", " ".join(argv), flush=True)
        done = subprocess.run(argv, cwd=context, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-60:])
        raise ImageBuildError(
            f"command failed ({done.returncode}): {' '.join(argv)}\n--- its output, last lines:\n"
            f"{tail}"
        )
    print(f"built {ref} ({time.monotonic() - started:.0f} s)", flush=True)


def _build_command() -> list[str]:
    """`docker build` with BuildKit where a docker client can drive it, else the legacy builder
    (DOCKER_BUILDKIT=0 asks for it).

    BuildKit runs an image's two stages side by side (the spark image's apt-get beside its
    virtualenv), builds a layer that concurrent builds share once, and does not commit, tar
    and digest every intermediate step as the legacy builder does: that was half the CPU of a
    cold build. A client from 23.0 on needs the buildx plugin for it; the 20.10 client that
    Debian's docker.io installs beside its dockerd (/usr/bin/docker) has it built in."""
    if os.environ.get("DOCKER_BUILDKIT") != "0":
        for client in dict.fromkeys(filter(None, (shutil.which("docker"), "/usr/bin/docker"))):
            if _drives_buildkit(client):
                return ["env", "DOCKER_BUILDKIT=1", client, "build", "--progress=plain"]
    return ["docker", "build"]


def _drives_buildkit(client: str) -> bool:
    if not os.access(client, os.X_OK):
        return False
    if subprocess.run([client, "buildx", "version"], capture_output=True).returncode == 0:
        return True
    answer = subprocess.run([client, "version", "--format", "{{.Client.Version}}"],
                            capture_output=True, text=True)  # fmt: skip
    try:
        major, minor = (int(part) for part in answer.stdout.strip().split(".")[:2])
    except ValueError:
        return False
    return (18, 9) <= (major, minor) < (23, 0)   # BuildKit built in, before buildx was needed


def _stage_context(image, context: Path) -> None:
    """What the image's Dockerfile copies, at the paths it names (relative to the repo root):
    its own folder, its members' sources (without bytecode) and its wheel folder."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    folders = [image.dockerfile_dir, *image.members]
    if image.package is not None:
        folders.append(f"deploy/.wheelhouse/images/{image.package}")
    for folder in dict.fromkeys(folders):
        shutil.copytree(REPO_ROOT / folder, context / folder, ignore=skip,
                        copy_function=_link, dirs_exist_ok=True)


def main() -> int:
    from deploy.engine import EngineUnavailable, ensure_engine

    try:
        ensure_engine()
        build_images(load(profiles=enabled_profiles(os.environ)))   # `make images ANALYTICS=1`
    except (ImageBuildError, EngineUnavailable) as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Each image is built from its own wheels and sources only: the gateway's image never carries
pyspark, and a pin without its wheel stops the build with the pin named."""

from __future__ import annotations

import pytest

from deploy import images
from deploy.topology import load


@pytest.fixture
def wheelhouse(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "WHEELHOUSE", tmp_path)
    monkeypatch.setattr(images, "BACKEND_WHEELS", tmp_path / "backend")
    (tmp_path / "backend").mkdir()
    for name in ("grpcio-1.70.0-cp311-cp311-manylinux_2_17_x86_64.whl",
                 "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.whl",
                 "pyspark-3.5.3-py2.py3-none-any.whl",
                 "async_timeout-4.0.3-py3-none-any.whl",
                 "tidemq_speedups-0.1.0-cp311-cp311-linux_x86_64.whl",
                 "backend/hatchling-1.27.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(name.encode())
    return tmp_path


def _requirements(wheelhouse, package: str, text: str) -> None:
    (wheelhouse / f"{package}.txt").write_text(text)


def test_an_image_folder_holds_its_pins_the_backend_and_its_host_built_members(wheelhouse):
    broker = load().images["broker"]   # members include native/ (tidemq_speedups)
    _requirements(wheelhouse, broker.package,
                  "# uv export\ngrpcio==1.70.0\npyyaml==6.0.2\n"
                  "async-timeout==4.0.3 ; python_full_version < '3.11.3'\n")
    folder = images._image_wheel_folder(broker)
    assert sorted(p.name for p in folder.iterdir()) == [
        "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.whl",
        "async_timeout-4.0.3-py3-none-any.whl",
        "grpcio-1.70.0-cp311-cp311-manylinux_2_17_x86_64.whl",
        "hatchling-1.27.0-py3-none-any.whl",
        "requirements.txt",
        "tidemq_speedups-0.1.0-cp311-cp311-linux_x86_64.whl",
    ]   # no pyspark: another image's wheel
    assert (folder / "requirements.txt").read_text().startswith("# uv export")


def test_an_image_without_native_members_gets_no_host_built_wheel(wheelhouse):
    gateway = load().images["gateway-grpc"]
    _requirements(wheelhouse, gateway.package, "grpcio==1.70.0\n")
    names = {p.name for p in images._image_wheel_folder(gateway).iterdir()}
    assert not any(n.startswith(("tidemq_speedups", "pyspark")) for n in names)


def test_a_pin_without_its_wheel_names_the_pin(wheelhouse):
    gateway = load().images["gateway"]
    _requirements(wheelhouse, gateway.package, "grpcio==1.71.0\n")
    with pytest.raises(images.ImageBuildError, match="grpcio==1.71.0"):
        images._image_wheel_folder(gateway)


def test_a_context_holds_the_dockerfile_folder_members_and_wheels_only(wheelhouse, tmp_path_factory,
                                                                       monkeypatch):
    repo = tmp_path_factory.mktemp("repo")
    gateway = load().images["gateway"]
    for folder in (*gateway.members, gateway.dockerfile_dir, "services/analytics",
                   f"deploy/.wheelhouse/images/{gateway.package}"):
        (repo / folder).mkdir(parents=True, exist_ok=True)
        (repo / folder / "file.py").write_text(folder)
    (repo / "shared" / "__pycache__").mkdir()
    (repo / "shared" / "__pycache__" / "file.cpython-311.pyc").write_bytes(b"")
    monkeypatch.setattr(images, "REPO_ROOT", repo)
    context = tmp_path_factory.mktemp("context")
    images._stage_context(gateway, context)
    staged = {p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file()}
    assert staged == {f"{folder}/file.py" for folder in (
        *gateway.members, f"deploy/.wheelhouse/images/{gateway.package}")}
    assert (context / "gateway/file.py").read_text() == "gateway"

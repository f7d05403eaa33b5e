"""The training image cannot be built here (no Docker engine): check what can be checked without building."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "container" / "Dockerfile"


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s#]+)", line.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_the_image_pins_the_same_versions_as_the_project():
    image, project = pins(ROOT / "container" / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert image, "container/requirements.txt pins nothing"
    for name, version in image.items():
        assert project.get(name) == version, f"{name}: image {version}, project {project.get(name)}"


def test_the_image_installs_its_lock_with_hashes_at_the_project_lock_versions():
    from infra.functions import locked_packages

    install = "pip install --require-hashes --no-deps -r /tmp/container-requirements.lock"
    assert install in DOCKERFILE.read_text()
    image = locked_packages(ROOT / "container" / "requirements.lock")
    project = locked_packages(ROOT / "requirements.lock")
    assert {"numpy", "boto3", "botocore"} <= set(image)
    assert {name: project.get(name) for name in image} == image


def test_every_copy_source_exists_and_survives_the_dockerignore():
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            sources.extend(line.split()[1:-1])
    assert sources
    ignore = (ROOT / "container" / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = [p[1:].rstrip("/") for p in ignore if p.startswith("!")]
    for src in sources:
        assert (ROOT / src).exists(), src
        assert any(src == a or src.startswith(a + "/") for a in allowed), (
            f"{src} is excluded from the context"
        )


def test_the_base_image_is_pinned_to_a_tag_and_the_entry_point_is_the_script_tested_here():
    text = DOCKERFILE.read_text()
    m = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert m and re.fullmatch(r"pytorch/pytorch:\d+\.\d+\.\d+-cuda\d+\.\d+-cudnn\d+-runtime", m.group(1))
    assert "COPY container/train.py /opt/program/train" in text
    assert 'ENTRYPOINT ["python", "/opt/program/train"]' in text

"""Reproducible builds: the locks pin everything pyproject.toml and the layer ask for, and the layer
runs exactly the versions the suite runs."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]


def _pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if "==" in requirement:
            parsed = Requirement(requirement)
            if parsed.marker is None or parsed.marker.evaluate():
                pins[canonicalize_name(parsed.name)] = str(parsed.specifier).removeprefix("==")
    return pins


def _asked(requirements: list[str]) -> list[Requirement]:
    environment = {**default_environment(), "extra": ""}
    parsed = [Requirement(text) for text in requirements]
    return [r for r in parsed if r.marker is None or r.marker.evaluate(environment)]


def test_the_dev_lock_pins_every_requirement_of_pyproject_within_its_range():
    # Given pyproject's dependencies and extras, and the dev lock
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    asked = list(project["dependencies"])
    for extra in ("local", "infra", "dev", "bench"):
        asked += [r for r in project["optional-dependencies"][extra] if not r.startswith("missions[")]
    pins = _pins(ROOT / "requirements" / "dev.lock")
    # Then each is pinned, at a version its range allows (`make lock` after editing pyproject)
    assert _asked(asked), "pyproject asks for nothing"
    for requirement in _asked(asked):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements/dev.lock: run make lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name], str(requirement))


def test_the_layer_runs_the_versions_the_suite_runs():
    # Given the layer's lock and the dev lock
    layer, dev = _pins(ROOT / "layers" / "requirements.lock"), _pins(ROOT / "requirements" / "dev.lock")
    asked = _asked(
        [
            line
            for line in (ROOT / "layers" / "requirements.in").read_text().splitlines()
            if line and not line.startswith("#")
        ]
    )
    # Then everything the layer asks for is pinned, at the very version the suite installs
    assert {canonicalize_name(r.name) for r in asked} <= set(layer)
    assert {name: version for name, version in layer.items() if dev.get(name) != version} == {}


def test_the_suite_runs_the_python_the_lock_was_made_for():
    # Given the locks were compiled for Python 3.11 (the Lambda runtime) / Then the suite runs it too
    header = (ROOT / "requirements" / "dev.lock").read_text().splitlines()[1]
    assert f"--python-version {sys.version_info.major}.{sys.version_info.minor}" in header, header

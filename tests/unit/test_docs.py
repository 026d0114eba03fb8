"""The documentation holds together: a short README that links every reference page, each page saying what it
covers, and no relative link (or its #anchor) pointing at nothing. The pages' examples are run as written by
tests/e2e/test_docs_*.py and the tests that name their page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "bench" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code, where a bracket is not a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _anchors(text: str) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug if slug not in anchors else f"{slug}-1")
    return anchors


def _relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_at_most_300_lines():
    lines = README.read_text().count("\n")
    assert lines <= 300, f"README.md has {lines} lines: move reference text into docs/"


def test_every_relative_link_points_at_an_existing_file_and_heading():
    # Given every relative link of the README and the reference pages
    links = [(page, target) for page in [README, *PAGES] for target in _relative_links(page)]
    assert links, "no relative link found"
    broken = []
    for page, target in links:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        # Then the file exists, and a #anchor names one of its headings
        if not file.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_links_every_reference_page_and_each_says_what_it_covers():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _relative_links(README)}
    assert PAGES and [p.relative_to(ROOT) for p in PAGES if p.resolve() not in linked] == []
    for page in PAGES:
        title, blank, summary, *_ = page.read_text().splitlines()
        assert title.startswith("# ") and blank == "" and summary.strip(), page

"""`missions me`: your data on an API, exported or erased."""

from __future__ import annotations

import sys

import typer

from .._console import fail, one_line, out
from .._target import Target, targeted

app = typer.Typer(no_args_is_help=True, help="Your data: export everything stored about you, or erase it.")


@app.command("export")
@targeted()
def export(
    output: str = typer.Option(
        "missions-export.jsonl", "--output", "-o", help="Where to write the JSON lines ('-': standard output)."
    ),
    *,
    target: Target,
) -> None:
    """Download everything stored about you (GET /me/export) as JSON lines."""
    with one_line():
        data = target.api().download("/me/export")
    if output == "-":
        sys.stdout.write(data.decode())
        return
    try:
        with open(output, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}")
    records = max(data.count(b"\n") - 1, 0)
    out.print(f"exported {records} records to {output}", highlight=False)


@app.command("erase")
@targeted()
def erase(
    yes: bool = typer.Option(False, "--yes", help="Erase without asking: it cannot be undone."),
    *,
    target: Target,
) -> None:
    """Erase everything stored about you (DELETE /me): missions, memory, conversations, repositories."""
    if not yes:
        fail("erasing everything stored about you cannot be undone: pass --yes")
    with one_line():
        report = target.api().call("DELETE", "/me")
    erased = ", ".join(f"{n} {store}" for store, n in sorted(report["erased"].items()) if n) or "nothing was stored"
    out.print(f"erased {report['user_id']}: {erased}", highlight=False, soft_wrap=True)

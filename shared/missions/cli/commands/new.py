"""`missions new`: new things from templates that run as made."""

from __future__ import annotations

import typer

from .._console import fail, out

app = typer.Typer(no_args_is_help=True, help="Make new things from templates that run as made.")


@app.command("capability")
def capability(
    name: str = typer.Argument(..., help="The capability's name (lowercase, digits, _)."),
    directory: str | None = typer.Option(None, "--dir", help="The capabilities package (default: the installed one)."),
) -> None:
    """Scaffold a capability: capability.toml and typed stages that run offline as generated."""
    from pathlib import Path

    from missions.local.scaffold import ScaffoldError
    from missions.local.scaffold import new_capability as scaffold

    if directory is None:  # the installed capabilities package, found without importing it
        import importlib.util

        spec = importlib.util.find_spec("capabilities")
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            fail("no capabilities package is installed here: give --dir")
        directory = locations[0]
    try:
        written = scaffold(name, Path(directory))
    except ScaffoldError as exc:
        fail(str(exc))
    for path in written:
        out.print(f"wrote {path}")
    out.print(f'try it: missions run {name} "{name.replace("_", " ")}"')

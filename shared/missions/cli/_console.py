"""The two consoles every command prints to, and the one way a command fails: one line, an exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from missions.client import ClientError

out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """A user-facing problem: printed as one line on stderr, exit code 2 unless told."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # one line, however long
    raise typer.Exit(code)


@contextmanager
def one_line() -> Iterator[None]:
    """A client's error (a refused call, an unreachable API, a missing stack) as the CLI's one line."""
    try:
        yield
    except ClientError as exc:
        fail(str(exc))

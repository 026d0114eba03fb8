"""One module per command group of the `missions` command, each a Typer app the package composes."""

"""`python -m missions.cli`: the `missions` command."""

from missions.cli import main

main()

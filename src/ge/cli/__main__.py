"""`python -m ge.cli`: the `ge` command without the console script."""

from ge.cli.process_exit import run

run()

"""`python -m ge.cli`: the `ge` command without the console script."""

from ge.cli import main

main()

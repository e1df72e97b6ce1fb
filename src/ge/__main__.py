"""`python -m ge`: the `ge` command without the console script."""

from ge.cli.process_exit import run

if __name__ == "__main__":
    run()

"""`python -m ge.pyatc`: the `pyatc` command without the console script."""

from ge.pyatc import run

if __name__ == "__main__":
    run()

"""`python -m ge`: the `ge` command without the console script."""

from ge.cli import main

if __name__ == "__main__":
    main()

"""`python -m ge.pyatc`: the `pyatc` command without the console script."""

import sys

from ge.pyatc import main

if __name__ == "__main__":
    sys.exit(main())

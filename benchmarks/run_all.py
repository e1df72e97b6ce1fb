"""Run every benchmark of this folder (`make bench`), each printing its comparison table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    status = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n== {script.name}")
        status |= subprocess.run([sys.executable, str(script)]).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())

"""`python -m odradek` runs the same command as `odradek`."""

import sys

from odradek.cli.main import main

if __name__ == "__main__":  # not when a worker process started with spawn imports it
    sys.exit(main())

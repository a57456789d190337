"""`python -m odradek` runs the same command as `odradek`."""

import sys

from odradek.cli.main import main

sys.exit(main())

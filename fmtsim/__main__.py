"""``python -m fmtsim``: the same as the ``fmtsim`` command."""

import sys

from .cli import main

sys.exit(main())

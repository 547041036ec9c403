"""``python -m bevviz``: the ``bevviz`` command (see :mod:`bevviz.cli`)."""

import sys

from bevviz.cli import main

sys.exit(main())

"""``python -m bevviz.synthetic --out sample_data``: regenerate the embedded sample."""

import sys

from bevviz.synthetic.dataset import main

sys.exit(main())

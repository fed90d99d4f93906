"""``python -m cluster.mqctl``: the ``mqctl`` command."""

import sys

from cluster.mqctl.cli import main

sys.exit(main())

"""``python -m sparkcast.cli``: the ``sparkcast`` command without the installed script."""

import sys

from sparkcast.cli import main

sys.exit(main())

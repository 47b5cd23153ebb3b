"""``python -m wayline``: the same as the ``wayline`` command (and ``python -m wayline.cli``)."""

import sys

from .cli import main

sys.exit(main())

"""``python -m wayline.cli``: the same as the ``wayline`` command."""

import sys

from . import main

sys.exit(main())

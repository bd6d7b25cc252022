"""``python -m icestream.cli``: the same as the ``icestream`` console script."""

import sys

from icestream.cli import main

sys.exit(main())

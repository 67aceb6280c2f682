"""``python -m pytest_rageval.cli``: the ``rageval`` command."""

import sys

from . import main

sys.exit(main())

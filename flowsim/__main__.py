"""``python -m flowsim``: the ``flowsim`` command, for environments whose scripts directory
is not on PATH."""

import sys

from flowsim.cli import main

sys.exit(main())

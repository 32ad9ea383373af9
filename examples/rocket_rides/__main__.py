"""``python -m rocket_rides`` (with ``examples/`` on ``sys.path``): the same as ``demo.py``."""

import sys

from .orchestrator import main

sys.exit(main())

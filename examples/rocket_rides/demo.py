#!/usr/bin/env python3
"""The Rocket Rides demo, runnable as a script: ``.venv/bin/python examples/rocket_rides/demo.py``.

Flags: ``--rides N`` (default 10000), ``--database postgresql://…`` (default SQLite in the run
directory), ``--no-faults``, ``--kill-server``, ``--port``, ``--seed``; ``--help`` lists the rest.
Exit status 0 means every consumer agreed with the rides table to the cent.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _main() -> int:
    if __package__:
        from .orchestrator import main
    else:
        # Run as a script: import the package from examples/, and not this directory's modules
        # as top-level names (log, db, api... would shadow anything so named).
        here = Path(__file__).resolve().parent
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
        sys.path.insert(0, str(here.parent))
        from rocket_rides.orchestrator import main
    return main()


if __name__ == "__main__":
    sys.exit(_main())

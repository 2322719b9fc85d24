#!/usr/bin/env python3
"""Write the bundled demo data: a fictional network and the four example test files.

    python3 data/make_demo.py                      # small bundled demo -> data/
    python3 data/make_demo.py --stations 150000 --samples 10000 --out DIR

The generator is transitlm/networks/demo/ (build.py, network.py, cases.py,
scenarios.py); `--help` lists every flag.  Byte-identical output for a seed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.networks.demo.build import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

#!/usr/bin/env python3
"""Build the four TransitLM benchmark files, labels included, for any network folder.

    python3 data/make_benchmark.py --network DIR --out DIR --samples N [--seed S] [--lang zh|en]
                                   [--workers N]

The builder is transitlm/networks/benchmark_builder.py (its labels come from
transitlm/networks/router.py); `--help` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.networks.benchmark_builder import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

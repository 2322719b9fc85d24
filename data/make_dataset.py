#!/usr/bin/env python3
"""Build the TransitLM training-data release -- SFT splits, the pre-training
corpus, the station vocabulary, the card -- for one or more network folders.

    python3 data/make_dataset.py --network DIR [--network DIR ...] --out DIR
        [--train N] [--test N] [--corpus N] [--part_size N] [--seed S] [--lang zh|en]
        [--workers N] [--parts A-B]

The builder is transitlm/datasets/ (cli.py); docs/training-data.md gives the
recipe and `--help` lists every flag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.datasets.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

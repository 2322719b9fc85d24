#!/usr/bin/env python3
"""Compare evaluation runs: metrics with bootstrap intervals, paired
significance against a baseline, and breakdowns by city, req_type and failure.

Usage: python3 compare.py RUN [RUN ...] [--names a,b] [--baseline NAME]
           [--bootstrap N] [--seed S] [--confidence 0.95]
           [--format text|markdown|latex|csv] [--json PATH] [--html PATH]
           [--by city|req_type|failure ...]

A RUN is a folder written by an evaluator's --out (report.json and
details.jsonl), or a details JSON Lines file with its report JSON beside it.

The machinery is in transitlm/compare/: run_folders (reading run folders),
metric_terms (per-row terms), bootstrap (intervals and paired significance),
group_figures and groups (the figures), breakdowns, main_table, formats,
latex and page (the outputs) and cli (this command line).  See
docs/comparison.md.
"""

import os
import sys

REPO = os.path.dirname(os.path.abspath(__file__))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.compare.cli import main  # noqa: E402
from transitlm.io.exit_status import run_command  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

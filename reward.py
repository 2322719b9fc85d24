#!/usr/bin/env python3
"""The benchmark's own verdicts as a reward for RL trainers (docs/reward.md).

Usage: python3 reward.py serve [--port 8766] [--host 127.0.0.1] [--station_info CSV]
           [--line_info CSV] [--benchmark B] [--protocol P] [--shaping S]
           [--failure F] [--weights KEY=W,...] [--read_timeout SECONDS]
       python3 reward.py prepare --input CSV --format trl|verl|openrlhf --out FILE.jsonl
           [--benchmark B] [--split NAME]

``serve`` answers POST /get_reward as OpenRLHF's remote reward (exactly what
transitlm.reward.openrlhf.reward_func answers in process); ``prepare`` writes
a release file in a trainer's layout.  The machinery is in transitlm/reward/:
cli (this command line), service, prepare, and the scoring and adapters
(scoring, trl, verl, openrlhf).
"""

import os
import sys

REPO = os.path.dirname(os.path.abspath(__file__))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.reward.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

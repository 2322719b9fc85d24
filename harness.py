#!/usr/bin/env python3
"""TransitLM inside other evaluation tools.

    python3 harness.py lm-eval --out DIR [--input TEST.csv ...] [--station_info S.csv]
                               [--line_info L.csv] [--protocol paper]
    python3 harness.py import LM_EVAL_OUTPUT --out DIR [--overwrite]

``lm-eval`` writes a task folder for lm-evaluation-harness: the tasks
transitlm_single_route, transitlm_personalized, transitlm_diversity and
transitlm_general and the group transitlm_all, over the test files given (the
bundled examples by default), each answer scored and each figure aggregated
by the evaluators' own rules.  Run it with the harness's own command:

    lm_eval --model local-chat-completions \\
        --model_args base_url=http://127.0.0.1:8000/v1/chat/completions,model=NAME \\
        --tasks transitlm_all --include_path DIR --apply_chat_template \\
        --output_path OUT --log_samples

``import`` turns what that run wrote (OUT, the model folder in it, or its
results file) into one run folder per TransitLM task, DIR/<task>: the
answers the harness logged, scored by the evaluator's own engine, as
``evaluate.py --predictions`` writes them -- for compare.py.

Exit status: 0 when the folders are written, 2 for a usage or input-file
problem (one line on stderr), 130/143 when stopped by SIGINT/SIGTERM.

The machinery is in ``transitlm/harness/``: ``cli`` (this command line),
``lm_eval_tasks`` (the task folder), ``lm_eval_scoring`` (what the harness
calls), ``lm_eval_utils`` (the folder's utils.py), ``lm_eval_output`` (what
the harness wrote) and ``lm_eval_import`` (its run folders).  See docs/harness.md.
"""

import os
import sys

REPO_DIR = os.path.dirname(os.path.abspath(__file__))
if REPO_DIR not in sys.path:
    sys.path.insert(0, REPO_DIR)
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.harness.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

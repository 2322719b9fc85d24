#!/usr/bin/env python3
"""Ask a model for every row of a TransitLM test file, through the OpenAI
chat-completions API, and write its answers as a predictions file.

    python3 generate.py --input FILE --api_url URL --model NAME --out preds.jsonl

Each row becomes one non-streaming ``POST {api_url}/chat/completions`` with its
system prompt (``--system_prompt_file``, else the row's ``system_prompt`` cell,
else the benchmark's default: transitlm/evaluation/chat_messages.py) and its ``sft_prompt`` as
the messages.  ``--out`` gets one JSON line per row as answers arrive:

    {"indexid", "generate_results": TEXT, ["reasoning",] "model", "finish_reason",
     "usage", "latency_s", "attempts"}
    {"indexid", "error": MESSAGE, "model", "http_status", "attempts", "latency_s"}

(an empty answer is an error line too, with its finish_reason).

Running the same command again skips rows that already have a result and asks
again for rows that failed (``--no_retry_errors`` keeps them), so a stopped run
continues where it left off.  At the end of a complete run the file holds one
line per id.  ``--evaluate`` then scores the file with the matching evaluator.

Standard library only.  The API key comes from the environment
(``OPENAI_API_KEY`` or ``--api_key_env NAME``) and is never printed or written.

Exit status: 0 when the run completes (rows that failed for good are listed as
``error`` lines and in the summary), 2 for a usage or input-file problem or a
fatal answer (401, 403, 404, an unknown host, a server that never answered,
the first rows all refused alike), 130/143 when stopped by SIGINT/SIGTERM at
any instant, or the evaluator's status when ``--evaluate`` fails.

The machinery is in ``transitlm/generate/``: ``cli`` (this command line),
``runner`` (rows, output file, the run), ``chat`` (requests and answers),
``failures`` and ``waits`` (what a failed answer means, how long to wait),
``settings`` (the settings sidecar) and ``resume`` (what may be done with
--out), on ``transitlm.io.http_client`` (requests bounded by a deadline, over
connections kept open).
"""

if __name__ == "__main__":
    # Ctrl-C while the modules load: no traceback.  SIGINT and SIGTERM wait
    # (held; _signal is built into the interpreter, nothing loads before it)
    # until quiet_start handles them, which then ends a run stopped so early.
    import _signal
    _HOLD = getattr(_signal, "pthread_sigmask", None)
    if _HOLD is not None:
        _HOLD(_signal.SIG_BLOCK, (_signal.SIGINT, _signal.SIGTERM))

import os  # noqa: E402
import sys  # noqa: E402

REPO_DIR = os.path.dirname(os.path.abspath(__file__))
if REPO_DIR not in sys.path:
    sys.path.insert(0, REPO_DIR)
if __name__ == "__main__":
    from transitlm.io.exit_status import quiet_start
    quiet_start()
    if _HOLD is not None:
        _HOLD(_signal.SIG_UNBLOCK, (_signal.SIGINT, _signal.SIGTERM))

from transitlm.io.exit_status import run_command  # noqa: E402
from transitlm.generate.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))

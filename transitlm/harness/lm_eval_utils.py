"""The functions the TransitLM task files name (``!function utils.NAME``), for
lm-evaluation-harness.  This is the utils.py of a task folder written by
``harness.py lm-eval`` (a copy of transitlm/harness/lm_eval_utils.py): write
the folder again rather than edit it.

The harness loads this file by its path, with its folder not on sys.path: it
reads the folder's settings (transitlm_tasks.json beside it), puts the
TransitLM project they name on sys.path and takes the functions from
transitlm.harness.lm_eval_scoring -- the project's own scoring and
aggregation.  Standard library only.
"""

import json
import os
import sys

SETTINGS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transitlm_tasks.json")

try:
    with open(SETTINGS_FILE, encoding="utf-8") as _handle:
        _settings = json.load(_handle)
except (OSError, ValueError) as _exc:
    raise ImportError("cannot read the TransitLM task settings %s (%s): this file is the "
                      "utils.py of a task folder that harness.py lm-eval writes; write the "
                      "folder again" % (SETTINGS_FILE, _exc))
if not os.path.isfile(os.path.join(_settings["project"], "transitlm", "harness",
                                   "lm_eval_scoring.py")):
    raise ImportError("the TransitLM project %s named by %s is not there any more: write the "
                      "task folder again with harness.py lm-eval"
                      % (_settings["project"], SETTINGS_FILE))
if _settings["project"] not in sys.path:
    sys.path.insert(0, _settings["project"])

from transitlm.harness.lm_eval_scoring import task_functions  # noqa: E402

globals().update(task_functions(_settings))

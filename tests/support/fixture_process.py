"""Runs one pure fixture function in a fresh Python process for
tests.support.Offloaded:

    python3 -m tests.support.fixture_process package.module:function [JSON arguments]

imports the module, calls the function with the arguments (a JSON list) and
writes its result as JSON on stdout; what the function itself prints goes to
stderr.  A function that raises exits 1 with the traceback on stderr, which
the test that asks for the result reports."""

import contextlib
import importlib
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def main(argv):
    target = argv[0]
    arguments = json.loads(argv[1]) if len(argv) > 1 else []
    module_name, _, function_name = target.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    with contextlib.redirect_stdout(sys.stderr):
        result = function(*arguments)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The data tools (import_gtfs.py, make_benchmark.py, make_demo.py) on hostile
inputs: every input the tests build themselves, small and in temporary folders.
Each class of damage gives one line and exit status 2 (or a counted skip), never a
traceback or a hang; limits are refused by name; text reaches the terminal escaped."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "data")
IMPORTER = os.path.join(DATA, "import_gtfs.py")
BUILDER = os.path.join(DATA, "make_benchmark.py")
DEMO = os.path.join(DATA, "make_demo.py")
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import common  # noqa: E402


def run(script, *args, timeout=60):
    done = subprocess.run([sys.executable, script] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


class VersionTest(unittest.TestCase):
    def test_each_tool_prints_the_project_version(self):
        for script in (IMPORTER, BUILDER, DEMO):
            status, out, err = run(script, "--version")
            self.assertEqual((status, out.strip(), err), (0, common.VERSION, ""), script)


if __name__ == "__main__":
    unittest.main()

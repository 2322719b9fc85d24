"""generate.py stopped by Ctrl-C or SIGTERM at many instants, from its first
milliseconds (modules loading, the input read, the settings file written,
the first requests) to its end (issue 29, point 5): never a traceback, exit
130 for SIGINT and 143 for SIGTERM (or the run completed first, exit 0), and
the output either absent with nothing left behind or holding whole lines and
its settings file; SIGKILL at a few instants of the run leaves whole lines
and the settings file.  Every output left is resumed to one line per row,
asking only for the rows without an answer, and the key is never printed."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from tests.support import (B1, REPO, SECRET, StandIn, answers_from, read_csv, read_lines,
                           run_generate)

SCRIPT = os.path.join(REPO, "generate.py")
# Seconds after the process starts.  Alone, generate.py starts in about a tenth
# of a second; with these 24 starting within a quarter of a second on two
# cores, the first half second is start-up, the rest the run (38 rows, 4 at a
# time, 0.05 s each) and its end.
INSTANTS = (0.004, 0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2,
            0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
# ... and the signal sent at each: SIGINT and SIGTERM in turn, SIGKILL at four.
SIGNALS = [(signal.SIGINT, signal.SIGTERM)[number % 2] for number in range(len(INSTANTS))]
for _number in (13, 17, 20, 23):
    SIGNALS[_number] = signal.SIGKILL
STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}


def project_traceback(stderr):
    """A traceback through a line of the project's code.  A signal that comes
    before the first line of generate.py is the interpreter's: it starts
    (a traceback without the project's files), or raises it as the script's
    code begins (``generate.py", line 0``)."""
    return re.search(r'File "[^"]*(generate\.py|transitlm/[^"]*)", line [1-9]', stderr)


class Interrupts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.answers = answers_from(B1)
        self.delay = [0.05]
        self.server = StandIn(lambda user, nth: ("slow", self.delay[0], self.answers[user]))

    def tearDown(self):
        self.server.close()
        self.tmp.cleanup()

    @staticmethod
    def stop(process, signum):
        if process.poll() is None:
            process.send_signal(signum)

    def test_stopped_at_any_instant(self):
        runs = []
        for number, instant in enumerate(INSTANTS):
            folder = os.path.join(self.tmp.name, str(number))
            os.mkdir(folder)
            out = os.path.join(folder, "new", "preds.jsonl")
            # -S: the interpreter without site-packages' start-up code, which is
            # not generate.py's (it needs nothing but the standard library).
            process = subprocess.Popen(
                [sys.executable, "-S", SCRIPT, "--input", B1, "--api_url", self.server.url,
                 "--model", "stand-in-model", "--out", out, "--concurrency", "4"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=dict(os.environ, OPENAI_API_KEY=SECRET))
            signum = SIGNALS[number]
            timer = threading.Timer(instant, self.stop, (process, signum))
            timer.start()
            runs.append((timer, process, signum, instant, folder, out))
            time.sleep(0.01)                 # not all starting on the same instant
        resumable = []
        for timer, process, signum, instant, folder, out in runs:
            timer.join()
            stdout, stderr = process.communicate(timeout=30)
            self.assertNotIn(SECRET.encode(), stdout + stderr)
            stderr = stderr.decode("utf-8", "replace")
            with self.subTest(instant=instant, signal=signum.name):
                self.assertFalse(project_traceback(stderr), stderr)
                status = process.returncode
                if signum == signal.SIGKILL:
                    self.assertIn(status, (0, -signal.SIGKILL))
                    if os.path.exists(out):        # whole lines (and a settings file)
                        read_lines(out)
                        resumable.append(out)
                    continue
                if status not in (0, STATUS[signum]):
                    # stopped before the first line of generate.py: the interpreter
                    # killed by the signal before it handles signals, or stopped by
                    # it as it starts (exit 1 or the signal's death); nothing begun
                    self.assertIn(status, (-signum, 1), stderr)
                    self.assertLess(instant, 0.05, stderr)
                    self.assertNotIn("generate.py:", stderr)
                elif status:
                    last = (stderr.strip().splitlines() or [""])[-1]
                    if "after" in last:                # stopped while asking
                        self.assertRegex(last, "^generate.py: stopped by %s after [0-9]+ of "
                                         "[0-9]+ rows of this run; run the same command "
                                         "again to continue$" % signum.name)
                    elif last:                         # before the run, or at its end
                        self.assertIn(last, ("generate.py: stopped by %s" % signum.name,
                                             "interrupted", "terminated (SIGTERM)"))
                if os.path.exists(out):
                    lines = read_lines(out)         # whole lines only
                    self.assertTrue(lines)
                    self.assertTrue(os.path.exists(out + ".settings.json"))
                    resumable.append(out)
                else:
                    self.assertEqual(os.listdir(folder), [])    # nothing left behind
        self.assertTrue(resumable)
        self.assertLess(len(resumable), len(runs))
        self.delay[0] = 0.0
        prompts = dict((row["index_id"], row["sft_prompt"]) for row in read_csv(B1))
        for out in resumable:
            answered = set(prompts[line["indexid"]] for line in read_lines(out)
                           if "generate_results" in line)
            before = len(self.server.requests)
            status, stdout, stderr = run_generate(
                ["--input", B1, "--api_url", self.server.url, "--model", "stand-in-model",
                 "--out", out], environ={"OPENAI_API_KEY": SECRET})
            self.assertEqual(status, 0, stderr)
            self.assertFalse(answered & set(self.server.users()[before:]))  # not asked again
            self.assertEqual(sorted(line["indexid"] for line in read_lines(out)),
                             sorted(prompts))
            self.assertNotIn(SECRET, stdout + stderr)


if __name__ == "__main__":
    unittest.main()

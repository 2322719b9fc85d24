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
import unittest

from tests.support import REPO
from tests.support.services import (B1, SECRET, StandIn, answers_from, read_csv, read_lines,
                                    run_generate)

SCRIPT = os.path.join(REPO, "generate.py")
ROWS = len(read_csv(B1))
# When each run is stopped.  ("after", s): s seconds after the process starts
# -- its start-up, modules loading, the input read; what it has reached by
# then depends on the machine, and every outcome is checked for what it
# leaves.  The rest wait for an event of the run itself, so they stop it
# where they say however slow the machine is: ("held", 1) once its first
# request arrived at a server that answers nothing until the run has ended
# (nothing can be written: nothing may be left); ("asked", n) once the
# server has received n requests; ("lines", n) once the output holds n lines
# (it must then be kept, whole, and resumable).
TRIGGERS = (("after", 0.004), ("after", 0.006), ("after", 0.008), ("after", 0.01),
            ("after", 0.013), ("after", 0.016), ("after", 0.02), ("after", 0.03),
            ("after", 0.05), ("after", 0.1), ("after", 0.2), ("after", 0.4),
            ("held", 1), ("held", 1), ("asked", 2), ("asked", 8), ("asked", 20),
            ("asked", ROWS), ("lines", 1), ("lines", 4), ("lines", 12), ("lines", 25),
            ("lines", ROWS), ("lines", 2))
# ... and the signal sent at each: SIGINT and SIGTERM in turn, SIGKILL at four.
SIGNALS = [(signal.SIGINT, signal.SIGTERM)[number % 2] for number in range(len(TRIGGERS))]
for _number in (15, 19, 21, 23):
    SIGNALS[_number] = signal.SIGKILL
STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}
WAIT_S = 120                     # a bound on any wait, never reached by a working run


def project_traceback(stderr):
    """A traceback through a line of the project's code.  A signal that comes
    before the first line of generate.py is the interpreter's: it starts
    (a traceback without the project's files), or raises it as the script's
    code begins (``generate.py", line 0``)."""
    return re.search(r'File "[^"]*(generate\.py|transitlm/[^"]*)", line [1-9]', stderr)


def lines_in(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().count(b"\n")
    except OSError:
        return 0


class Run(object):
    """One generate.py process, its own stand-in server, and the thread that
    signals it when its trigger comes."""

    def __init__(self, folder, trigger, signum, answers, delay):
        self.folder, self.trigger, self.signum = folder, trigger, signum
        self.out = os.path.join(folder, "new", "preds.jsonl")
        self.release = threading.Event()        # a held server answers after this
        held = trigger[0] == "held"

        def script(user, nth):
            if held:
                self.release.wait(WAIT_S)
            return ("slow", delay[0], answers[user])
        self.server = StandIn(script)
        # -S: the interpreter without site-packages' start-up code, which is
        # not generate.py's (it needs nothing but the standard library).
        self.process = subprocess.Popen(
            [sys.executable, "-S", SCRIPT, "--input", B1, "--api_url", self.server.url,
             "--model", "stand-in-model", "--out", self.out, "--concurrency", "4"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, OPENAI_API_KEY=SECRET))
        self.signalled = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def reached(self):
        kind, value = self.trigger
        if kind in ("held", "asked"):
            return len(self.server.requests) >= value
        return lines_in(self.out) >= value

    def watch(self):
        kind, value = self.trigger
        if kind == "after":
            self.signalled.wait(value)            # nothing sets it: a plain wait
        else:
            waited = 0.0
            while not self.reached() and self.process.poll() is None and waited < WAIT_S:
                self.signalled.wait(0.002)
                waited += 0.002
        if self.process.poll() is None:
            self.process.send_signal(self.signum)

    def finish(self):
        try:
            stdout, stderr = self.process.communicate(timeout=WAIT_S)
        finally:
            self.release.set()
            self.thread.join(WAIT_S)
        return stdout, stderr


class Interrupts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.answers = answers_from(B1)
        self.delay = [0.05]
        self.runs = []

    def tearDown(self):
        for run in self.runs:
            run.release.set()
            run.server.close()
        self.tmp.cleanup()

    def test_stopped_at_any_instant(self):
        runs = self.runs
        for number, trigger in enumerate(TRIGGERS):
            folder = os.path.join(self.tmp.name, str(number))
            os.mkdir(folder)
            runs.append(Run(folder, trigger, SIGNALS[number], self.answers, self.delay))
        resumable = []
        for run in runs:
            stdout, stderr = run.finish()
            self.assertNotIn(SECRET.encode(), stdout + stderr)
            stderr = stderr.decode("utf-8", "replace")
            kind, value = run.trigger
            signum, out = run.signum, run.out
            with self.subTest(trigger=run.trigger, signal=signum.name):
                self.assertFalse(project_traceback(stderr), stderr)
                status = run.process.returncode
                if kind == "held":           # asking, nothing answered: nothing left
                    self.assertEqual(status, STATUS[signum], stderr)
                    self.assertEqual(os.listdir(run.folder), [])
                    continue
                if kind == "lines":          # whole lines were there: they stay
                    self.assertTrue(os.path.exists(out))
                if signum == signal.SIGKILL:
                    self.assertIn(status, (0, -signal.SIGKILL))
                    if os.path.exists(out):        # whole lines (and a settings file)
                        read_lines(out)
                        resumable.append(run)
                    continue
                if status not in (0, STATUS[signum]):
                    # stopped before the first line of generate.py: the interpreter
                    # killed by the signal before it handles signals, or stopped by
                    # it as it starts (exit 1 or the signal's death); nothing begun.
                    # A run that asked the server had begun.
                    self.assertIn(status, (-signum, 1), stderr)
                    self.assertEqual(kind, "after", stderr)
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
                    resumable.append(run)
                else:
                    self.assertEqual(os.listdir(run.folder), [])    # nothing left behind
        self.assertTrue(resumable)
        self.delay[0] = 0.0
        prompts = dict((row["index_id"], row["sft_prompt"]) for row in read_csv(B1))
        for run in resumable:
            out = run.out
            answered = set(prompts[line["indexid"]] for line in read_lines(out)
                           if "generate_results" in line)
            before = len(run.server.requests)
            status, stdout, stderr = run_generate(
                ["--input", B1, "--api_url", run.server.url, "--model", "stand-in-model",
                 "--out", out], environ={"OPENAI_API_KEY": SECRET})
            self.assertEqual(status, 0, stderr)
            self.assertFalse(answered & set(run.server.users()[before:]))  # not asked again
            self.assertEqual(sorted(line["indexid"] for line in read_lines(out)),
                             sorted(prompts))
            self.assertNotIn(SECRET, stdout + stderr)


if __name__ == "__main__":
    unittest.main()

"""transitlm/io/exit_status.py: how every command ends.  An evaluator stopped by
SIGINT or SIGTERM at any instant leaves either none of its outputs (exit
130/143) or all of them (it had finished); a signal while a command starts
prints one line, never a traceback."""

import os
import signal
import subprocess
import sys
import time
import unittest

from tests.support import REPO
from tests.support.lane import Offloaded
import transitlm.io.exit_status  # noqa: E402

RUN_FILES = ["details.jsonl", "report.html", "report.json", "report.txt", "run.json"]
INSTANTS = 24                    # interrupts spread over one run


# The runs are made in a process of their own beside the suite
# (tests/support/interrupts.py; tests.support.Offloaded): a fresh interpreter
# has no other thread to take the signals a run holds.
TIMED = hasattr(signal, "setitimer") and hasattr(signal, "pthread_sigmask")
STOPPED = (Offloaded("tests.support.interrupts:stopped_at_every_instant", INSTANTS)
           if TIMED else None)


@unittest.skipUnless(TIMED, "needs POSIX timers and signal masks")
class InterruptAtAnyInstantTest(unittest.TestCase):
    def test_all_or_nothing(self):
        outcomes = STOPPED.result()
        self.assertEqual(len(outcomes), INSTANTS + 3)
        first, parsing, inside = outcomes[0], outcomes[-2], outcomes[-1]
        self.assertEqual((first["status"], first["held"]), (0, RUN_FILES))
        for outcome in outcomes[1:-2]:
            status = outcome["status"]
            with self.subTest(instant=outcome["instant"], signal=outcome["signal"],
                              status=status):
                if status in (130, 143):
                    self.assertEqual(status, transitlm.io.exit_status.SIGNAL_STATUS[
                        getattr(signal, outcome["signal"])])
                    self.assertFalse(outcome["left"], "a stopped run left %s" % outcome["held"])
                elif status == 0 or status == "late":
                    self.assertEqual(outcome["held"], RUN_FILES)
                else:
                    self.fail("exit status %r" % status)
        # A signal as the arguments are parsed: the run ends as stopped (a
        # KeyboardInterrupt out of the run would be "late"), nothing begun.
        self.assertEqual(parsing["status"], 130)
        self.assertFalse(parsing["left"])
        # However fast or slow the machine, one signal certainly comes inside
        # the run: sent as the report is rendered, the files not yet in place.
        self.assertEqual(inside["status"], 143)
        self.assertFalse(inside["left"])


def loading_modules(pid, timeout=20.0):
    """Wait until process ``pid`` loads the csv module's library (the commands
    load it with their modules, after their first lines; the interpreter's own
    start-up never does) -> True, or False when it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/maps" % pid) as handle:
                if "_csv" in handle.read():
                    return True
        except OSError:
            return False
        time.sleep(0.0005)
    return False


@unittest.skipUnless(os.path.isdir("/proc/self"), "needs /proc to see a command start")
class StartUpTest(unittest.TestCase):
    def test_a_signal_while_a_command_starts(self):
        # Ctrl-C or SIGTERM while a command loads its modules (after the
        # interpreter's own start-up, out of any program's reach): one line
        # and 130/143, never a KeyboardInterrupt traceback.
        scripts = [os.path.join(REPO, "single_route", "evaluate.py"),
                   os.path.join(REPO, "compare.py"), os.path.join(REPO, "generate.py")]
        for index in range(6):
            script = scripts[index % len(scripts)]
            number = (signal.SIGINT, signal.SIGTERM)[index % 2]
            process = subprocess.Popen([sys.executable, script, "--help"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if loading_modules(process.pid):
                time.sleep(0.002 * index)
            process.send_signal(number)
            _, err = process.communicate(timeout=30)
            with self.subTest(script=script, signal=number.name):
                self.assertNotIn(b"Traceback", err)
                self.assertIn(process.returncode,
                              (0, transitlm.io.exit_status.SIGNAL_STATUS[number], -number))


if __name__ == "__main__":
    unittest.main()

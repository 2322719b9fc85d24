"""transitlm/exit_status.py: how every command ends.  An evaluator stopped by
SIGINT or SIGTERM at any instant leaves either none of its outputs (exit
130/143) or all of them (it had finished); a signal while a command starts
prints one line, never a traceback."""

import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

from tests.support import REPO, lane_paused
import transitlm.cli  # noqa: E402
import transitlm.exit_status  # noqa: E402
import transitlm.records  # noqa: E402

RUN_FILES = ["details.jsonl", "report.html", "report.json", "report.txt", "run.json"]
INSTANTS = 24                    # interrupts spread over one run


@unittest.skipUnless(hasattr(signal, "setitimer") and hasattr(signal, "pthread_sigmask"),
                     "needs POSIX timers and signal masks")
class InterruptAtAnyInstantTest(unittest.TestCase):
    def setUp(self):
        # The signals sent to this process reach its main thread only: the
        # fixtures' lane beside the suite (which would take them while a run
        # holds them) is paused.
        pause = lane_paused()
        pause.__enter__()
        self.addCleanup(pause.__exit__, None, None, None)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.benchmark = transitlm.records.load_benchmark("single_route")
        previous = {number: signal.getsignal(number)
                    for number in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM)}
        self.addCleanup(lambda: [signal.signal(n, h) for n, h in previous.items()])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        transitlm.exit_status.raise_on_terminate()

    def run_once(self, out, delay=None, number=signal.SIGINT):
        """One in-process run (the bundled example, into a new run folder two
        levels deep), with ``number`` sent to this process after ``delay`` s
        -> its exit status, or "late" when the signal came after it returned."""
        argv = ["--quiet", "--workers", "1", "--out", out]
        if delay is not None:
            signal.signal(signal.SIGALRM, lambda *args: os.kill(os.getpid(), number))
            signal.setitimer(signal.ITIMER_REAL, delay)
        try:
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    return transitlm.cli.run(self.benchmark, argv)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except KeyboardInterrupt:
            return "late"

    def test_all_or_nothing(self):
        started = time.perf_counter()
        self.assertEqual(self.run_once(os.path.join(self.tmp.name, "first", "run")), 0)
        duration = time.perf_counter() - started
        for index in range(INSTANTS):
            number = (signal.SIGINT, signal.SIGTERM)[index % 2]
            top = os.path.join(self.tmp.name, "at-%d" % index)
            out = os.path.join(top, "new", "run")
            status = self.run_once(out, duration * (index + 0.5) / INSTANTS * 1.3, number)
            held = sorted(os.listdir(out)) if os.path.isdir(out) else None
            with self.subTest(instant=index, signal=number.name, status=status):
                if status in (130, 143):
                    self.assertEqual(status, transitlm.exit_status.SIGNAL_STATUS[number])
                    self.assertFalse(os.path.exists(top), "a stopped run left %s" % held)
                elif status == 0 or status == "late":
                    self.assertEqual(held, RUN_FILES)
                else:
                    self.fail("exit status %r" % status)
        # However fast or slow the machine, one signal certainly comes inside
        # the run: sent as the report is rendered, the files not yet in place.
        render = transitlm.cli.report_json

        def signalled_render(report):
            os.kill(os.getpid(), signal.SIGTERM)
            return render(report)
        top = os.path.join(self.tmp.name, "inside")
        with mock.patch.object(transitlm.cli, "report_json", signalled_render):
            status = self.run_once(os.path.join(top, "new", "run"))
        self.assertEqual(status, 143)
        self.assertFalse(os.path.exists(top))


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
                              (0, transitlm.exit_status.SIGNAL_STATUS[number], -number))


if __name__ == "__main__":
    unittest.main()

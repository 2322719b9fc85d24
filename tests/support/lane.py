"""The lane beside the suite: slow fixtures computed one at a time while the tests run (Background: in a thread; Offloaded: in a fresh process), every program it starts given the environment the suite started with."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading

from tests.support import REPO

# The environment the suite started with (this module is imported while the
# test modules load, before any test runs).  Tests change os.environ for a
# while (mock.patch.dict); a program the lane starts meanwhile would inherit
# the change -- a station file of a folder since deleted, say -- so every
# process started from the lane's thread gets this environment instead.
SUITE_ENVIRONMENT = dict(os.environ)
_THREAD = threading.local()             # .in_lane: this thread is the lane's
_popen_init = subprocess.Popen.__init__


def suite_environment(**extra):
    """The environment the suite started with, plus ``extra``."""
    return dict(SUITE_ENVIRONMENT, **extra)


def _lane_popen_init(self, *args, **kwargs):
    if getattr(_THREAD, "in_lane", False) and kwargs.get("env") is None:
        kwargs["env"] = SUITE_ENVIRONMENT
    _popen_init(self, *args, **kwargs)


subprocess.Popen.__init__ = _lane_popen_init


class _Beside(object):
    """A slow fixture started as its test module is loaded and computed
    beside the suite, in the lane: one job at a time, in the order their
    modules were loaded, which is the order the tests run in (and ask for
    them) -- one core for the suite, one for the lane, rather than every
    fixture at once while the first modules run.  ``result()`` waits for the
    job and returns its value, or raises what it raised; a job the lane has
    not started yet is run at once by the caller.

    SIGINT and SIGTERM sent to this process go to a thread that does not
    hold them: between jobs the lane holds them, and a test that signals this
    process (transitlm.io.exit_status holds them in the main thread while a run
    commits) pauses the lane (``lane_paused``) so that they reach the main
    thread only; a job runs with them let through, so that the programs it
    starts can be stopped."""

    _lock = threading.Condition()
    _queue = []
    _lane = None
    _processes = []             # Offloaded's, running
    _busy = False               # the lane runs a job
    _paused = 0
    _HELD = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM")
                  if hasattr(signal, name))

    def _enqueue(self):
        self._value = self._error = None
        self._done = threading.Event()
        cls = _Beside
        with cls._lock:
            cls._queue.append(self)
            if cls._lane is None:
                cls._lane = threading.Thread(target=cls._run_lane, daemon=True)
                cls._lane.start()
                import atexit
                atexit.register(cls._stop)
            cls._lock.notify()

    @classmethod
    def _hold(cls, how):
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(how, cls._HELD)

    @classmethod
    def _run_lane(cls):
        _THREAD.in_lane = True          # its programs get SUITE_ENVIRONMENT
        cls._hold(signal.SIG_BLOCK)
        while True:
            with cls._lock:
                while not cls._queue or cls._paused:
                    cls._lock.wait()
                job = cls._queue.pop(0)
                cls._busy = True
            cls._hold(signal.SIG_UNBLOCK)
            try:
                job._run()
            finally:
                cls._hold(signal.SIG_BLOCK)
                with cls._lock:
                    cls._busy = False
                    cls._lock.notify_all()

    @classmethod
    @contextlib.contextmanager
    def paused(cls):
        """The lane's job done and no other started while the block runs."""
        with cls._lock:
            cls._paused += 1
            while cls._busy:
                cls._lock.wait()
        try:
            yield
        finally:
            with cls._lock:
                cls._paused -= 1
                cls._lock.notify_all()

    @classmethod
    def _stop(cls):
        # A module run on its own may not ask for every result.
        with cls._lock:
            del cls._queue[:]
            for process in cls._processes:
                process.kill()

    def _run(self):
        try:
            self._value = self._compute()
        except BaseException as exc:            # handed to the test that asks
            self._error = exc
        finally:
            self._done.set()

    def result(self):
        with _Beside._lock:
            mine = self in _Beside._queue
            if mine:
                _Beside._queue.remove(self)
        if mine:
            self._run()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


lane_paused = _Beside.paused


class Background(_Beside):
    """Work that waits on other processes (a program of its own, commands run
    one after another): ``function()`` run in the lane's thread."""

    def __init__(self, function):
        self._function = function
        self._enqueue()

    def _compute(self):
        return self._function()


class Offloaded(_Beside):
    """Pure computation (CPU-bound, so a thread of this process would not run
    it beside the tests): the function ``target`` ("package.module:function",
    called with JSON ``arguments``) run in a fresh Python process of its own
    (tests.support.fixture_process; not a fork of this process, whose other
    threads may hold locks) -> its JSON result; a function that failed fails
    the test with its traceback."""

    def __init__(self, target, *arguments):
        self.argv = [sys.executable, "-m", "tests.support.fixture_process", target,
                     json.dumps(arguments)]
        self._enqueue()

    def _compute(self):
        with _Beside._lock:
            process = subprocess.Popen(self.argv, cwd=REPO, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, universal_newlines=True,
                                       encoding="utf-8")
            _Beside._processes.append(process)
        try:
            out, err = process.communicate()
        finally:
            with _Beside._lock:
                _Beside._processes.remove(process)
        if process.returncode != 0:
            raise AssertionError("%s exited %s:\n%s" % (" ".join(self.argv[3:]),
                                                         process.returncode, err))
        return json.loads(out)

"""The evaluator stopped at any instant, in a process of its own (for
tests/test_exit_status.py through tests.support.Offloaded): a fresh
interpreter has no thread but its main one, so every signal sent to it
reaches the main thread whatever the fixtures beside the suite are doing.

``stopped_at_every_instant(instants)`` runs the bundled example once to time
it, then ``instants`` runs each sent SIGINT or SIGTERM (in turns) at an
instant spread over that time, one run sent SIGINT as its arguments are
parsed and one sent SIGTERM from inside, as its report is rendered -> a list of outcomes, one per run: {"instant", "signal",
"status" (the exit status, or "late" when the signal came after the run
returned), "held" (the run folder's files, or None), "left" (whether
anything of the run is left)}."""

import contextlib
import io
import os
import signal
import tempfile
import time
from unittest import mock

import transitlm.cli
import transitlm.io.exit_status
import transitlm.evaluation.records


def _run_once(benchmark, out, delay=None, number=signal.SIGINT):
    argv = ["--quiet", "--workers", "1", "--out", out]
    if delay is not None:
        signal.signal(signal.SIGALRM, lambda *args: os.kill(os.getpid(), number))
        signal.setitimer(signal.ITIMER_REAL, delay)
    try:
        try:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                return transitlm.cli.run(benchmark, argv)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        return "late"


def _outcome(instant, number, status, top, out):
    return {"instant": instant, "signal": signal.Signals(number).name, "status": status,
            "held": sorted(os.listdir(out)) if os.path.isdir(out) else None,
            "left": os.path.exists(top)}


def _signalled(function, number):
    """``function``, sending this process signal ``number`` as it is called."""
    def signalled(*args):
        os.kill(os.getpid(), number)
        return function(*args)
    return signalled


def stopped_at_every_instant(instants):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    transitlm.io.exit_status.raise_on_terminate()
    benchmark = transitlm.evaluation.records.load_benchmark("single_route")
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        first = os.path.join(tmp, "first")
        started = time.perf_counter()
        status = _run_once(benchmark, os.path.join(first, "run"))
        duration = time.perf_counter() - started
        outcomes.append(_outcome("first", signal.SIGINT, status, first,
                                 os.path.join(first, "run")))
        for index in range(instants):
            number = (signal.SIGINT, signal.SIGTERM)[index % 2]
            top = os.path.join(tmp, "at-%d" % index)
            out = os.path.join(top, "new", "run")
            status = _run_once(benchmark, out, duration * (index + 0.5) / instants * 1.3,
                               number)
            outcomes.append(_outcome(index, number, status, top, out))
        # One signal certainly comes as the arguments are parsed, before
        # anything is begun, and, however fast or slow the machine, one
        # inside the run: sent as the report is rendered, the files not yet
        # in place.
        for name, where, number in (("parsing", "build_parser", signal.SIGINT),
                                    ("inside", "report_json", signal.SIGTERM)):
            top = os.path.join(tmp, name)
            out = os.path.join(top, "new", "run")
            with mock.patch.object(transitlm.cli, where,
                                   _signalled(getattr(transitlm.cli, where), number)):
                status = _run_once(benchmark, out)
            outcomes.append(_outcome(name, number, status, top, out))
    return outcomes

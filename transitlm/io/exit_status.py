"""Exit statuses of the tools, the errors that stop a whole run, and the one
way every command ends: Ctrl-C, SIGTERM and a closed pipe.

Every tool exits with

    0    it did its job
    1    a worker process of --workers died (the evaluators)
    2    a usage or input-file problem (one line on stderr, never a traceback)
    3    the route-eval service stayed unreachable (the general-LLM evaluator)
    130  stopped by SIGINT (Ctrl-C)
    143  stopped by SIGTERM (``kill``, a job scheduler)

``run_command`` is the entry point of every command: SIGTERM is raised in the
main thread as ``Terminated`` (a KeyboardInterrupt, so the same ``finally``
blocks remove what a stopped run had begun to write), the status follows the
signal, ``cmd | head`` closing the pipe ends the run quietly, and text the
terminal's encoding cannot hold is printed as escapes.

Standard library only; Python 3.8+.
"""

import contextlib
import os
import signal
import sys
import threading

EXIT_OK = 0
EXIT_WORKER = 1                  # a worker process died (killed by a signal)
EXIT_USAGE = 2                   # usage or input-file problem
EXIT_SERVICE = 3                 # route-eval service unreachable (general LLM)
EXIT_INTERRUPTED = 128 + signal.SIGINT      # 130: Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM      # 143: kill, a scheduler's stop
SIGNAL_STATUS = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}


class ServiceError(Exception):
    """The route-eval service stayed unreachable: the run stops (exit status 3)."""


class WorkerFailed(Exception):
    """A worker process of --workers died (killed by a signal, the out-of-memory
    killer): the run stops (exit status 1)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be, so a run stops the same way."""


def interrupted_status(exc):
    """The exit status of a run stopped by ``exc`` (a KeyboardInterrupt)."""
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def interrupted_message(exc):
    """The line a stopped run ends with on stderr."""
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


def raise_on_terminate():
    """From now on SIGTERM raises ``Terminated`` in this process's main thread.

    A process forked from this one (a worker of --workers) takes the default
    action instead: the main process ends it.  Outside the main thread (a
    program embedding a tool) nothing is changed.
    """
    main = os.getpid()

    def terminate(signum, frame):
        if os.getpid() != main:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated()
    try:
        signal.signal(signal.SIGTERM, terminate)
    except (ValueError, OSError):
        pass


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held(drop=False):
    """SIGINT and SIGTERM wait until the block is done, so its steps happen
    together or not at all (a folder made and recorded; the outputs renamed
    into place).  A signal that arrived before the block is raised as it
    begins.  With ``drop``, a signal that arrives during the block is dropped:
    the block finished the run, which exits as done.  Only in the main thread
    where the platform can hold signals; elsewhere the block just runs."""
    if (not hasattr(signal, "pthread_sigmask")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    except KeyboardInterrupt:
        # A signal that came before the block: handled as the mask changed.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
        raise
    try:
        yield
    finally:
        pending = set(signal.sigpending()) & set(_HELD) if drop else ()
        # Ignoring a held signal discards it (POSIX); the handlers come back after.
        saved = [(number, signal.signal(number, signal.SIG_IGN)) for number in pending]
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        finally:
            for number, handler in saved:
                signal.signal(number, handler)


def quiet_start():
    """Ctrl-C or SIGTERM while a command starts (its modules loading, nothing
    begun) ends it at once with 130/143 and one line, not a traceback.
    ``run_command`` takes over from there."""
    def stop(signum, frame):
        _say("\n%s\n" % ("terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"))
        os._exit(SIGNAL_STATUS[signum])
    try:
        for number in _HELD:
            signal.signal(number, stop)
    except (ValueError, OSError):       # not the main thread
        pass


def run_command(main, argv=None):
    """Run a command's ``main(argv)`` and return its exit status.

    ``main`` handles its own errors (exit status 2 with one line) and may
    catch KeyboardInterrupt to clean up; one that reaches here (Ctrl-C while
    the command starts) ends the run with the signal's status and one line.
    """
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass
    raise_on_terminate()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    try:
        status = main(argv)
    except KeyboardInterrupt as exc:
        _say("\n%s\n" % interrupted_message(exc))
        status = interrupted_status(exc)
    except BrokenPipeError:
        # `tool | head` closed stdout: nothing more to say.
        status = EXIT_OK
    try:
        sys.stdout.flush()
    except OSError:
        status = status or EXIT_USAGE
    # The interpreter's own final flush must not print a traceback (a full
    # disk, a closed pipe): stdout is done with.
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    # The run is over and its status known: a signal from here on (while the
    # interpreter shuts down) must not turn a finished run into a killed one.
    try:
        for number in _HELD:
            signal.signal(number, signal.SIG_IGN)
    except (ValueError, OSError):
        pass
    return status


def _say(text):
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass

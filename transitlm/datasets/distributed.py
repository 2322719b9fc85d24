"""data/ray_make_dataset.py without Ray (issue 44, point 3): its options, the
ranges of corpus parts its tasks build, what a task runs, and the completion.
data/ray_make_dataset.py holds only the Ray calls; it is the one file of the
project that imports ``ray``, and only when it runs.

    python3 data/ray_make_dataset.py [make_dataset.py's options]
        [--address ADDR] [--parts_per_task N] [--retries N] [--num_cpus N]

Why its folder is byte for byte one make_dataset.py run's:

- A part's records depend only on their numbers, the networks and the
  settings (plan.py), so a part is the same file whichever process builds it.
- A task is make_dataset.py's own builder (cli.main), called in the Ray
  worker's process with ``--parts A-B``: it draws the test files to hold their
  trips out (or reads the trips an earlier task of these settings left:
  release.read_holdout_cache), removes its own parts' leftovers, writes each missing part as a
  dot-file and renames it into place when complete (release.PartWriter).  A
  task that fails (an exception, or its worker killed mid-part) is retried by
  Ray; the retry runs the same range, removes the half part the failed attempt
  left and builds what is missing.  Parts of other ranges go on meanwhile
  (make_dataset.py allows ranges side by side in one folder).
- When every task is done, the driver runs make_dataset.py without --parts
  (``complete``), in its own process, with the options as given: it finds every
  part there and writes the rest -- the SFT files, the network and vocabulary
  files, the manifest and the card -- as a plain run does.

Test hook (tests/test_datasets_ray.py, not for users): when the driver's
environment has TRANSITLM_TEST_RAY_FAULT set to a folder, it hands that folder
to every task.  The first task attempts to start claim the faults of FAULTS,
one each, in order (by creating ``<folder>/<fault>.claimed``); an attempt
with a fault wraps release.PartWriter.write in its process so that, once the
first records of a part are written (the dot-file holds a half part), it
records the dot-file's path in ``<folder>/<fault>`` and then ``crash``es (the
process exits at once, as a killed worker) or ``raise``s.  Each fault fires
once, so the retries succeed.

Standard library only; Python 3.8+.
"""

import argparse
import contextlib
import io
import os
import sys

from transitlm.io.exit_status import EXIT_USAGE, EXIT_WORKER
from transitlm.networks import limits
from transitlm.datasets import cli, release
from transitlm.datasets import release_names as names

PROG = "ray_make_dataset.py"
DEFAULT_PARTS_PER_TASK = 1
DEFAULT_RETRIES = 3
MAX_RETRIES = 100
MAX_CPUS = 1 << 20
PATH_OPTIONS = ("network", "out")          # made absolute for the tasks
INSTALL = "pip install ray"
FAULT_ENV = "TRANSITLM_TEST_RAY_FAULT"
FAULTS = ("crash", "raise")


class PartsFailed(Exception):
    """A task's make_dataset.py --parts A-B run did not finish (Ray retries it)."""


class FaultInjected(Exception):
    """The test hook's ``raise`` fault."""


# ---------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------

def parse_args(argv):
    parser = cli.make_parser(prog=PROG, description=(
        "Build the TransitLM training-data release on Ray: make_dataset.py's options, its "
        "corpus parts built by Ray tasks into one --out, then the folder completed as one "
        "make_dataset.py run writes it (the same bytes). Needs Ray (%s)." % INSTALL))
    ray = parser.add_argument_group("Ray")
    ray.add_argument("--address", default=None,
                     help="the Ray cluster (host:port, ray://host:port, auto, local); default: "
                          "ray.init()'s own rule -- $RAY_ADDRESS (set inside `ray job submit`), "
                          "else a cluster `ray start` began on this machine, else a local Ray "
                          "started on the spot")
    ray.add_argument("--parts_per_task", type=limits.int_arg(1, names.MAX_PARTS),
                     default=DEFAULT_PARTS_PER_TASK,
                     help="corpus parts per Ray task (default %(default)s); each task also "
                          "loads the networks and the test trips, to hold them out")
    ray.add_argument("--retries", type=limits.int_arg(0, MAX_RETRIES), default=DEFAULT_RETRIES,
                     help="times Ray retries a task that fails, its worker killed or raising "
                          "(default %(default)s)")
    ray.add_argument("--num_cpus", type=limits.int_arg(1, MAX_CPUS), default=None,
                     help="CPUs of a local Ray started here (default: the machine's); not for "
                          "a cluster. Each task takes --workers CPUs")
    for action in parser._actions:          # here --workers is the CPUs a task reserves
        if action.dest == "workers":
            action.default = 1
            action.help = ("make_dataset.py's processes inside each task, and the CPUs each "
                           "task reserves on its node (default 1)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers is the CPUs each Ray task reserves: at least 1")
    if args.num_cpus is not None and args.workers > args.num_cpus:
        parser.error("each task takes --workers %d CPUs, more than --num_cpus %d"
                     % (args.workers, args.num_cpus))
    return args


def builder_argv(args, absolute=False):
    """make_dataset.py's options of this run, as its command line, without the
    Ray options and --parts (a task adds its own); ``absolute``: the paths made
    absolute, for tasks that may run in another working folder or on another
    machine."""
    argv = []
    for action in cli.make_parser()._actions:
        if not action.option_strings or action.dest in (argparse.SUPPRESS, "help", "version",
                                                        "parts"):
            continue
        value = getattr(args, action.dest, None)
        if value is None:
            continue
        option = "--" + action.dest
        for one in (value if isinstance(value, list) else [value]):
            one = str(one)
            if absolute and action.dest in PATH_OPTIONS:
                one = os.path.abspath(one)
            argv.append("%s=%s" % (option, one))
    return argv


def fail(message, status=EXIT_USAGE):
    sys.stderr.write("%s: %s\n" % (PROG, limits.one_line(str(message))))
    return status


def missing_ray():
    return fail("Ray is not installed for %s: %s (or run data/make_dataset.py, which needs "
                "nothing else)" % (sys.executable, INSTALL))


# ---------------------------------------------------------------------------
# The plan: what the tasks build
# ---------------------------------------------------------------------------

def task_ranges(first, last, per_task):
    """Parts first..last in ranges of ``per_task`` -> [(A, B)], in order."""
    return [(a, min(last, a + per_task - 1)) for a in range(first, last + 1, per_task)]


def plan(args):
    """Everything a make_dataset.py run checks, before Ray starts (InputError
    on bad input) -> (ranges to build, parts already there, parts in all)."""
    ctx, _, _, parts = cli.prepare(args)
    first, last = parts or (1, ctx.plan.parts)
    there = [k for k in range(first, last + 1)
             if os.path.exists(os.path.join(args.out, names.corpus_part(k)))]
    todo = [(a, b) for a, b in task_ranges(first, last, args.parts_per_task)
            if any(k not in there for k in range(a, b + 1))]
    return todo, len(there), last - first + 1


# ---------------------------------------------------------------------------
# A task (in a Ray worker's process)
# ---------------------------------------------------------------------------

def run_range(argv, first, last, fault=None):
    """make_dataset.py ``argv`` --parts first-last, in this process -> what it
    printed; PartsFailed when it did not finish (Ray retries the task)."""
    out, err = io.StringIO(), io.StringIO()
    with injected_fault(fault), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv) + ["--parts=%d-%d" % (first, last)])
    if status != 0:
        lines = err.getvalue().strip().splitlines()
        raise PartsFailed("parts %d-%d: %s" % (first, last, lines[-1] if lines else
                                                "make_dataset.py exit status %s" % status))
    return out.getvalue()


def claim_fault(folder):
    """The test hook: the first fault of FAULTS no attempt has claimed yet, now
    this one's; None when all are taken."""
    for kind in FAULTS:
        try:
            os.close(os.open(os.path.join(folder, kind + ".claimed"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return kind
    return None


@contextlib.contextmanager
def injected_fault(folder):
    """The test hook (see the module's docstring); nothing without ``folder``."""
    kind = claim_fault(folder) if folder else None
    if kind is None:
        yield
        return
    original = release.PartWriter.write

    def write(self, *args):
        original(self, *args)
        if self.rows > 1:                      # the header and some records
            self.file.flush()
            with open(os.path.join(folder, kind), "w", encoding="utf-8") as handle:
                handle.write(self.temp)
            if kind == "crash":
                os._exit(EXIT_WORKER)
            raise FaultInjected("a fault injected by %s (a test hook)" % FAULT_ENV)
    release.PartWriter.write = write
    try:
        yield
    finally:
        release.PartWriter.write = original


# ---------------------------------------------------------------------------
# What the driver says, and the completion
# ---------------------------------------------------------------------------

def say(text):
    print(limits.terminal_text(text), flush=True)


def plan_line(args, ranges, there, count, cpus):
    """What the run will do; a task needing more CPUs than the cluster has
    waits (an autoscaler may add them): said on stderr."""
    if cpus < args.workers:
        sys.stderr.write("%s: note: each task takes --workers %d CPU(s) and the Ray cluster has %d "
                         "now: the tasks wait until it has more\n" % (PROG, args.workers, cpus))
    todo = sum(b - a + 1 for a, b in ranges)
    return ("ray            %d part(s) in %d task(s) of up to %d, %d CPU(s) each, on a Ray of %d "
            "CPU(s)%s" % (todo, len(ranges), args.parts_per_task, args.workers, cpus,
                          "; %d of %d part(s) already there" % (there, count) if there else ""))


def task_done(first, last, printed):
    """The line of a finished task, from what its make_dataset.py run printed."""
    notes = [line.split(None, 1)[1] for line in printed.splitlines()
             if line.startswith(names.CORPUS_FOLDER + "/") and len(line.split(None, 1)) == 2]
    notes += [line for line in printed.splitlines() if line.startswith("removed ")]
    return "%-14s %s" % ("parts %d-%d" % (first, last), "; ".join(notes) or "done")


def task_failure(first, last, exc):
    """One line for a task that failed every attempt: its cause (PartsFailed,
    FaultInjected, ...) where Ray carries it, else the first line of Ray's error."""
    cause = getattr(exc, "cause", None) or exc
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    text = lines[0]
    prefix = "parts %d-%d: " % (first, last)
    return text if text.startswith(prefix) else prefix + text


def failed(failures, retries):
    return fail("%d task(s) failed after %d attempt(s) each (%s); the parts finished are kept, "
                "the same command finishes the run" % (len(failures), retries + 1,
                                                      "; ".join(failures)), EXIT_WORKER)


def complete(args):
    """make_dataset.py without --parts, in this process, with the options as
    given: it finds the parts built and writes the rest of the folder."""
    if args.parts is not None:
        say("parts %s written; run without --parts to complete the folder" % args.parts)
        return 0
    say("completing     the folder: make_dataset.py without --parts")
    return cli.main(builder_argv(args))

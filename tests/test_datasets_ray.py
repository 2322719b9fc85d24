"""data/ray_make_dataset.py and transitlm/datasets/distributed.py (issue 44,
point 3): make_dataset.py's corpus parts as Ray tasks write, byte for byte,
the folder one make_dataset.py run writes; a task that fails (its worker
killed mid-part, or raising) is retried by Ray and leaves no half part; a task
that fails every attempt ends the run with exit status 1, the parts finished
kept, and the same command finishes it; without Ray, --help and --version
work and a run says in one line how to install it.

Ray lives in the virtual environment named by $TRANSITLM_LM_EVAL_VENV
(``.ci/run`` makes one with lm-eval and Ray; the harness test uses it too).
Without it, or without Ray in it, the Ray runs skip with one line, except
under CI=true, where they fail.  One local Ray of 2 CPUs serves every run (a
process that holds it, started once, beside the suite: Ray takes seconds to
start); the drivers join it with --address."""

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

from tests.support import REPO
from tests.support.chromium import in_ci
from tests.support.evaluator_rows import run_in_process
from tests.support.lane import Background, suite_environment

from transitlm.datasets import cli, distributed, release_names as names

VENV_ENV = "TRANSITLM_LM_EVAL_VENV"
DEMO = os.path.join(REPO, "data")
MAKE = os.path.join(REPO, "data", "make_dataset.py")
DRIVER = os.path.join(REPO, "data", "ray_make_dataset.py")
# Five corpus parts (336 records: 320 static, 16 sessions).
SMALL = ["--train", "10", "--test", "6", "--corpus", "16", "--part_size", "70"]
PARTS = 5
TIMEOUT = 300

# The process that holds a local Ray of 2 CPUs for the test's drivers: its
# address on stdout; Ray shut down when its stdin closes (also when the suite
# dies).  Token authentication off, so the drivers join without a token and
# nothing is written in the user's home.
HOLDER = """
import logging, sys
import ray
context = ray.init(address="local", num_cpus=2, include_dashboard=False,
                   logging_level=logging.WARNING, _temp_dir=sys.argv[1])
print(context.address_info["gcs_address"], flush=True)
sys.stdin.read()
ray.shutdown()
"""


def ray_python():
    """The Python of $TRANSITLM_LM_EVAL_VENV, or None."""
    venv = os.environ.get(VENV_ENV)
    python = os.path.join(venv, "bin", "python") if venv else None
    return python if python and os.access(python, os.X_OK) else None


def ray_env(**extra):
    env = suite_environment(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", **extra)
    env.pop("RAY_ADDRESS", None)
    if distributed.FAULT_ENV not in extra:
        env.pop(distributed.FAULT_ENV, None)
    return env


def run(argv, env=None):
    done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, encoding="utf-8", timeout=TIMEOUT)
    return done.returncode, done.stdout, done.stderr


def tree(folder):
    """{path under folder: bytes} of every file, dot-files included."""
    files = {}
    for where, _, names_here in os.walk(folder):
        for name in names_here:
            path = os.path.join(where, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, folder)] = handle.read()
    return files


@contextlib.contextmanager
def held_ray(python, root):
    """A local Ray of 2 CPUs, held by a process of its own -> its address."""
    temp = tempfile.mkdtemp(prefix="tlray", dir="/tmp" if os.path.isdir("/tmp") else None)
    holder = subprocess.Popen([python, "-c", HOLDER, temp], cwd=root, env=ray_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
    try:
        address = holder.stdout.readline().strip()
        if not address:
            raise AssertionError("the local Ray did not start: %s" % holder.stderr.read()[-3000:])
        yield address
    finally:
        holder.stdin.close()
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
        holder.stdout.close()
        holder.stderr.close()
        shutil.rmtree(temp, True)


def ray_runs(python):
    """make_dataset.py once, then the Ray driver on one held local Ray: plainly,
    with a fault in two tasks' first attempts, and with --retries 0 (then the
    same command again) -> {name: (status, stdout, stderr)}, {name: tree},
    the fault folder; or a string: why Ray cannot run here."""
    probe = run([python, "-c", "import ray"])
    if probe[0]:
        return "ray is not importable by %s: %s" % (python, probe[2].strip()[-300:])
    root = tempfile.mkdtemp(prefix="transitlm-ray-")
    try:
        out = os.path.join(root, "release")
        base = ["--network", DEMO, "--out", out] + SMALL
        runs, trees = {}, {}

        def keep(name, result):
            runs[name] = result
            trees[name] = tree(out)
            shutil.rmtree(out)

        keep("plain", run([sys.executable, MAKE] + base))
        faults = os.path.join(root, "faults")
        spent = os.path.join(root, "spent")
        for folder in (faults, spent):
            os.mkdir(folder)
        with held_ray(python, root) as address:
            driver = [python, DRIVER] + base + ["--address", address]
            keep("ray", run(driver + ["--parts_per_task", "2"], ray_env()))
            keep("fault", run(driver, ray_env(**{distributed.FAULT_ENV: faults})))
            # Both faults fire with no retry: two tasks fail, the third's parts
            # are kept; the same command (its faults spent) finishes the run.
            again = driver + ["--parts_per_task", "2", "--retries", "0"]
            runs["given_up"] = run(again, ray_env(**{distributed.FAULT_ENV: spent}))
            trees["given_up"] = tree(out)
            keep("again", run(again, ray_env(**{distributed.FAULT_ENV: spent})))
        fault_files = {}
        for name in os.listdir(faults):
            with open(os.path.join(faults, name), encoding="utf-8") as handle:
                fault_files[name] = handle.read()
        return runs, trees, fault_files, out
    finally:
        shutil.rmtree(root, True)


PYTHON = ray_python()
RAY_RUNS = Background(lambda: ray_runs(PYTHON)) if PYTHON else None


class RayDriverRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        found = RAY_RUNS.result() if RAY_RUNS else (
            "%s is not set to a virtual environment with Ray (.ci/run makes one)" % VENV_ENV)
        if isinstance(found, str):
            message = "the Ray driver's runs: " + found
            if in_ci():
                raise AssertionError(message + "; CI is set, so they must run")
            raise unittest.SkipTest(message)
        cls.runs, cls.trees, cls.faults, cls.out = found
        for name in ("plain", "ray", "fault", "again"):
            status, _, stderr = cls.runs[name]
            if status != 0:
                raise AssertionError("%s run: exit status %s: %s" % (name, status, stderr[-3000:]))

    def task_lines(self, name):
        return [line for line in self.runs[name][1].splitlines() if line.startswith("parts ")]

    def test_the_tasks_write_one_make_dataset_runs_bytes(self):
        plain = self.trees["plain"]
        self.assertIn(names.corpus_part(PARTS), plain)
        self.assertNotIn(names.corpus_part(PARTS + 1), plain)
        self.assertIn(names.CARD, plain)
        # Three tasks (parts 1-2, 3-4, 5) on a Ray of 2 CPUs, then the completion.
        self.assertEqual(sorted(line.split()[1] for line in self.task_lines("ray")),
                         ["1-2", "3-4", "5-5"])
        self.assertIn("on a Ray of 2 CPU(s)", self.runs["ray"][1])
        self.assertIn("completing", self.runs["ray"][1])
        self.assertEqual(sorted(self.trees["ray"]), sorted(plain))
        for path in plain:
            self.assertEqual(self.trees["ray"][path], plain[path], path)

    def test_a_failed_attempt_is_retried_and_leaves_no_half_part(self):
        # The test hook fired once each way: a worker killed mid-part, a task
        # raising mid-part; each had a half part on disk, as a dot-file.
        self.assertEqual(sorted(self.faults), sorted(
            list(distributed.FAULTS) + [kind + ".claimed" for kind in distributed.FAULTS]))
        for kind in distributed.FAULTS:
            temp = self.faults[kind]
            self.assertEqual(os.path.dirname(temp), os.path.join(self.out, names.CORPUS_FOLDER))
            self.assertTrue(os.path.basename(temp).startswith(".transitlm-part"), temp)
        self.assertEqual(len(self.task_lines("fault")), PARTS)
        # The killed worker's half part was removed by the retry of its range
        # (the raising one removed its own).
        self.assertEqual(self.runs["fault"][1].count("removed 1 unfinished file(s)"), 1)
        self.assertEqual(self.trees["fault"], self.trees["plain"])

    def test_a_task_that_fails_every_attempt_keeps_the_parts_finished(self):
        status, stdout, stderr = self.runs["given_up"]
        self.assertEqual(status, 1, stderr[-2000:])
        last = stderr.strip().splitlines()[-1]
        self.assertRegex(last, r"^ray_make_dataset\.py: 2 task\(s\) failed after 1 attempt\(s\) "
                               r"each \(.*\); the parts finished are kept, the same command "
                               r"finishes the run$")
        self.assertIn(distributed.FAULT_ENV, last)              # the raised fault's line
        self.assertEqual(len([line for line in stdout.splitlines()
                              if line.startswith("failed ")]), 2)
        self.assertNotIn("completing", stdout)
        kept = self.trees["given_up"]
        parts = [p for p in kept if p.startswith(names.CORPUS_FOLDER + "/transit-lm")]
        self.assertTrue(parts)
        for path in parts:
            self.assertEqual(kept[path], self.trees["plain"][path], path)
        self.assertNotIn(names.CARD, kept)
        # The same command finishes it.
        self.assertIn("removed 1 unfinished file(s)", self.runs["again"][1])
        self.assertEqual(self.trees["again"], self.trees["plain"])


def load_driver():
    spec = importlib.util.spec_from_file_location("ray_make_dataset_under_test", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DriverWithoutRay(unittest.TestCase):
    """What needs no Ray: the options, the messages, the plan of tasks."""

    @classmethod
    def setUpClass(cls):
        cls.driver = load_driver()

    def main(self, argv, ray=None):
        with mock.patch.dict(sys.modules, {"ray": ray}):
            return run_in_process(self.driver.main, argv)

    def test_help_and_version_need_no_ray(self):
        status, stdout, stderr = self.main(["--help"])
        self.assertEqual((status, stderr), (0, ""))
        for flag in ("--network", "--out", "--corpus", "--part_size", "--workers", "--parts",
                     "--address", "--parts_per_task", "--retries", "--num_cpus"):
            self.assertIn(flag, stdout)
        status, stdout, stderr = self.main(["--version"])
        self.assertEqual(status, 0)
        self.assertTrue(stdout.startswith("transitlm "))

    def test_without_ray_one_line_says_how_to_install_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "release")
            status, stdout, stderr = self.main(["--network", DEMO, "--out", out] + SMALL)
            self.assertEqual(status, 2)
            self.assertEqual(len(stderr.splitlines()), 1, stderr)
            self.assertIn("Ray is not installed", stderr)
            self.assertIn("pip install ray", stderr)
            self.assertFalse(os.path.exists(out))

    def test_bad_options_and_input_exit_2_in_one_line_before_ray_starts(self):
        # A module named ray with nothing in it: a run that reached Ray would
        # fail with an AttributeError, not exit 2.
        stub = types.ModuleType("ray")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "release")
            for argv, said in (
                    (["--parts_per_task", "0"], "--parts_per_task"),
                    (["--retries", "many"], "--retries"),
                    (["--num_cpus", "0"], "--num_cpus"),
                    (["--num_cpus", "2", "--workers", "3"], "more than --num_cpus 2"),
                    (["--workers", "0"], "at least 1"),
                    (["--parts", "6-7"], "outside the plan"),
                    (["--parts", "3-1"], "--parts")):
                with self.subTest(argv=argv):
                    status, stdout, stderr = self.main(
                        ["--network", DEMO, "--out", out] + SMALL + argv, stub)
                    self.assertEqual(status, 2, stderr)
                    self.assertEqual(len(stderr.splitlines()), 1, stderr)
                    self.assertIn(said, stderr)
                    self.assertFalse(os.path.exists(out))
            status, _, stderr = self.main(["--network", os.path.join(tmp, "none"), "--out", out],
                                          stub)
            self.assertEqual((status, len(stderr.splitlines())), (2, 1), stderr)
            self.assertIn("is not a folder", stderr)

    def test_a_task_that_raises_leaves_the_folder_to_the_others(self):
        # A task (in this process) raising mid-part, by the test hook: its half
        # part is gone, and the corpus folder stays for the ranges beside it
        # (make_dataset.py --parts makes it outside its transaction).
        with tempfile.TemporaryDirectory() as tmp:
            out, faults = os.path.join(tmp, "release"), os.path.join(tmp, "faults")
            os.mkdir(faults)
            open(os.path.join(faults, "crash.claimed"), "w").close()   # not in this process
            argv = ["--network", DEMO, "--out", out] + SMALL
            with self.assertRaises(distributed.FaultInjected):
                distributed.run_range(argv, 2, 3, faults)
            with open(os.path.join(faults, "raise"), encoding="utf-8") as handle:
                half = handle.read()
            corpus = os.path.join(out, names.CORPUS_FOLDER)
            self.assertEqual(os.path.dirname(half), corpus)
            self.assertEqual(os.listdir(corpus), [])
            self.assertTrue(os.path.isfile(os.path.join(out, names.MANIFEST)))
            # The retry (its fault spent) builds the range.
            printed = distributed.run_range(argv, 2, 3, faults)
            self.assertIn("2 part(s) built", distributed.task_done(2, 3, printed))
            self.assertEqual(sorted(os.listdir(corpus)),
                             [os.path.basename(names.corpus_part(k)) for k in (2, 3)])
            # A run that does not finish is PartsFailed, with make_dataset.py's line.
            with self.assertRaisesRegex(distributed.PartsFailed, r"^parts 1-1: make_dataset\.py: "
                                                                   r"--network .* is not a folder"):
                distributed.run_range(["--network", os.path.join(tmp, "none"), "--out", out], 1, 1)

    def test_task_ranges(self):
        self.assertEqual(distributed.task_ranges(1, 5, 2), [(1, 2), (3, 4), (5, 5)])
        self.assertEqual(distributed.task_ranges(3, 3, 4), [(3, 3)])
        self.assertEqual(distributed.task_ranges(2, 7, 1), [(k, k) for k in range(2, 8)])

    def test_a_task_gets_every_make_dataset_option(self):
        argv = ["--network", "a", "--network", "/b", "--out", "o", "--train", "3", "--test", "2",
                "--corpus", "5", "--part_size", "9", "--seed=-4", "--lang", "en",
                "--workers", "2", "--parts", "1-2", "--address", "x:1", "--parts_per_task", "3",
                "--retries", "1", "--num_cpus", "2"]
        args = distributed.parse_args(argv)
        theirs = vars(cli.parse_args(distributed.builder_argv(args)))
        self.assertEqual(theirs, dict(vars(cli.parse_args(argv[:-8])), parts=None))
        # Every option of make_dataset.py is carried (one added later too).
        given = {action.dest for action in cli.make_parser()._actions if action.option_strings}
        self.assertEqual(given - set(theirs), {"help", "version"})
        absolute = vars(cli.parse_args(distributed.builder_argv(args, absolute=True)))
        self.assertEqual(absolute["network"], [os.path.abspath("a"), "/b"])
        self.assertEqual(absolute["out"], os.path.abspath("o"))


if __name__ == "__main__":
    unittest.main()

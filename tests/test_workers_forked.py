"""transitlm.evaluation.workers.ForkedWorkers: order, large messages, failures, no process left
behind."""

import os
import signal
import time
import unittest

from tests import support  # noqa: F401  (puts the project on sys.path)
from transitlm.evaluation import workers as worker_pool

HAS_FORK = hasattr(os, "fork")


def _square_after(task):
    """(n, seconds) -> n * n after sleeping: results come back out of order."""
    number, seconds = task
    time.sleep(seconds)
    return number * number


def _echo_size(task):
    """bytes -> bytes of the same size, reversed (large both ways)."""
    return task[::-1]


def _fail_on_three(task):
    if task == 3:
        raise ValueError("three is not allowed")
    return task


def _die_on_three(task):
    if task == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return task


def _pid(task):
    time.sleep(0.05)
    return os.getpid()


def _alive(pid):
    """Is ``pid`` still a child of this process (running or not yet reaped)?"""
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


@unittest.skipUnless(HAS_FORK, "no fork on this platform")
class ForkedWorkersTest(unittest.TestCase):
    def setUp(self):
        # A hang is a failure: SIGALRM interrupts it.
        def too_slow(signum, frame):
            raise AssertionError("ForkedWorkers hung")
        self.previous = signal.signal(signal.SIGALRM, too_slow)
        signal.alarm(30)

    def tearDown(self):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)

    def test_results_in_submission_order(self):
        # Early tasks are the slow ones: later results arrive first.
        tasks = [(n, 0.2 if n < 2 else 0.0) for n in range(12)]
        with worker_pool.ForkedWorkers(3, _square_after) as pool:
            for task in tasks:
                pool.submit(task)
            self.assertEqual(pool.busy, 12)
            results = [pool.result() for _ in tasks]
            self.assertEqual(pool.busy, 0)
        self.assertEqual(results, [n * n for n in range(12)])

    def test_results_interleaved_with_submissions(self):
        with worker_pool.ForkedWorkers(2, _square_after) as pool:
            got = []
            for n in range(20):
                pool.submit((n, 0.0))
                if pool.busy == 4:
                    got.append(pool.result())
            while pool.busy:
                got.append(pool.result())
        self.assertEqual(got, [n * n for n in range(20)])

    def test_large_tasks_and_results_do_not_deadlock(self):
        # 8 MB each way, far beyond a pipe's buffer, all submitted before any
        # result is taken: the workers block writing results while this
        # process still has task bytes to write.
        tasks = [bytes([n]) * (8 << 20) + b"end" for n in range(6)]
        with worker_pool.ForkedWorkers(2, _echo_size) as pool:
            for task in tasks:
                pool.submit(task)
            for task in tasks:
                self.assertEqual(pool.result(), task[::-1])

    def test_an_exception_in_a_worker_is_raised_here_with_its_traceback(self):
        with worker_pool.ForkedWorkers(2, _fail_on_three) as pool:
            for n in range(6):
                pool.submit(n)
            self.assertEqual([pool.result() for _ in range(3)], [0, 1, 2])
            with self.assertRaises(worker_pool.WorkerError) as caught:
                pool.result()
            message = str(caught.exception)
            self.assertIn("ValueError: three is not allowed", message)
            self.assertIn("_fail_on_three", message)
            # The worker lives on: the next results still come.
            self.assertEqual([pool.result() for _ in range(2)], [4, 5])

    def test_a_killed_worker_is_reported_not_waited_for(self):
        pool = worker_pool.ForkedWorkers(2, _die_on_three)
        pids = [worker.pid for worker in pool._workers]
        with self.assertRaises(worker_pool.WorkerFailure) as caught:
            with pool:
                for n in range(8):
                    pool.submit(n)
                while pool.busy:
                    pool.result()
        message = str(caught.exception)
        self.assertRegex(message, r"^worker process \d+ was killed by signal 9 \(SIGKILL\)$")
        for pid in pids:
            self.assertFalse(_alive(pid), "worker %d left running" % pid)

    def test_discarded_results_are_never_returned(self):
        with worker_pool.ForkedWorkers(2, _square_after) as pool:
            for n in range(5):
                pool.submit((n, 0.05))
            self.assertEqual(pool.result(), 0)
            pool.discard()
            self.assertEqual(pool.busy, 0)
            with self.assertRaises(ValueError):
                pool.result()
            for n in range(10, 13):
                pool.submit((n, 0.0))
            self.assertEqual([pool.result() for _ in range(3)], [100, 121, 144])

    def test_workers_exit_when_closed(self):
        pool = worker_pool.ForkedWorkers(3, _pid)
        pids = [worker.pid for worker in pool._workers]
        with pool:
            for n in range(6):
                pool.submit(n)
            used = {pool.result() for _ in range(6)}
        self.assertTrue(used <= set(pids))
        self.assertGreater(len(used), 1, "the tasks were not shared out")
        for pid in pids:
            self.assertFalse(_alive(pid), "worker %d left running" % pid)

    @unittest.skipUnless(os.path.isdir("/proc/self/fd"), "no /proc to list descriptors")
    def test_a_worker_holds_no_other_workers_pipes(self):
        # Were it to, a worker would keep another's task pipe open after this
        # process closed it, and that worker alive.
        def pipes_of(pid):
            folder = "/proc/%d/fd" % pid
            links = set()
            for name in os.listdir(folder):
                try:
                    links.add(os.readlink(os.path.join(folder, name)))
                except OSError:
                    pass
            return {link for link in links if link.startswith("pipe:")}
        with worker_pool.ForkedWorkers(3, _pid) as pool:
            for n in range(3):             # one task each: past their setting up
                pool.submit(n)
            self.assertEqual(len({pool.result() for _ in range(3)}), 3)
            own = {worker.pid: {"pipe:[%d]" % os.fstat(fd).st_ino
                                for fd in (worker.tasks_fd, worker.results_fd)}
                   for worker in pool._workers}
            for pid in own:
                others = set().union(*[pipes for other, pipes in own.items() if other != pid])
                held = pipes_of(pid)
                self.assertTrue(own[pid] <= held)
                self.assertEqual(held & others, set(), "worker %d" % pid)

    def test_an_error_here_kills_the_workers(self):
        pool = worker_pool.ForkedWorkers(2, _square_after)
        pids = [worker.pid for worker in pool._workers]
        started = time.monotonic()
        with self.assertRaises(KeyError):
            with pool:
                pool.submit((1, 600.0))    # a long task the error must not wait for
                pool.submit((2, 600.0))
                raise KeyError("stop")
        self.assertLess(time.monotonic() - started, 60)   # however busy the machine
        for pid in pids:
            self.assertFalse(_alive(pid), "worker %d left running" % pid)

    def test_how_it_ended(self):
        self.assertEqual(worker_pool.how_it_ended(9), "was killed by signal 9 (SIGKILL)")
        self.assertEqual(worker_pool.how_it_ended(1 << 8), "exited with status 1")
        self.assertEqual(worker_pool.how_it_ended(0), "exited with status 0")

    def test_at_least_one_worker(self):
        with self.assertRaises(ValueError):
            worker_pool.ForkedWorkers(0, _pid)


if __name__ == "__main__":
    unittest.main()


class BuildWorkerCountTest(unittest.TestCase):
    """The builders' --workers 0 (their default): one worker per core, at most
    DEFAULT_BUILD_WORKERS; make_benchmark.py and make_dataset.py share it."""

    def test_zero_is_one_per_core_at_most_the_cap(self):
        from unittest import mock
        cap = worker_pool.DEFAULT_BUILD_WORKERS
        for cores, wanted in ((1, 1), (3, 3), (cap + 5, cap)):
            with mock.patch.object(worker_pool, "available_cores", return_value=cores):
                self.assertEqual(worker_pool.build_worker_count(0), wanted, cores)
                self.assertEqual(worker_pool.build_worker_count(5), 5)

    def test_available_cores_are_the_affinity(self):
        from unittest import mock
        cores = worker_pool.available_cores()
        self.assertTrue(1 <= cores <= (os.cpu_count() or 1))
        if hasattr(os, "sched_getaffinity"):
            with mock.patch("os.sched_getaffinity", return_value={0, 3, 5}):
                self.assertEqual(worker_pool.available_cores(), 3)
        with mock.patch("os.sched_getaffinity", side_effect=OSError, create=True), \
                mock.patch("os.cpu_count", return_value=None):
            self.assertEqual(worker_pool.available_cores(), 1)

    def test_both_builders_default_to_it(self):
        from transitlm.datasets import cli as dataset_cli
        from transitlm.networks import benchmark_builder
        rows = benchmark_builder.parse_args(["--network", "n", "--out", "o", "--samples", "1"])
        release = dataset_cli.parse_args(["--network", "n", "--out", "o"])
        self.assertEqual((rows.workers, release.workers), (0, 0))

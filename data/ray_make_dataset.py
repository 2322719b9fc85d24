#!/usr/bin/env python3
"""Build the TransitLM training-data release on Ray: make_dataset.py's corpus
parts built by Ray tasks into one --out, then the folder completed as one
make_dataset.py run writes it (the same bytes).

    python3 data/ray_make_dataset.py --network DIR [--network DIR ...] --out DIR
        [make_dataset.py's other options] [--address ADDR] [--parts_per_task N]
        [--retries N] [--num_cpus N]

The one file of the project that imports ray, and only when it runs (--help
and --version need no Ray): the Ray calls.  The rest is
transitlm/datasets/distributed.py; docs/training-data.md gives the recipes.
"""

import logging
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

from common import InputError  # noqa: E402
from transitlm.io.exit_status import raise_on_terminate, run_command  # noqa: E402
from transitlm.datasets import distributed  # noqa: E402


def build_range(root, argv, first, last, fault):
    """A Ray task: make_dataset.py --parts first-last in the worker's process."""
    if os.path.isdir(root) and root not in sys.path:
        sys.path.insert(0, root)
    from transitlm.datasets.distributed import run_range
    return run_range(argv, first, last, fault)


def main(argv=None):
    args = distributed.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import ray
    except ImportError:
        return distributed.missing_ray()
    try:
        ranges, there, count = distributed.plan(args)
    except InputError as exc:
        return distributed.fail(exc)
    if ranges:
        try:
            ray.init(address=args.address, num_cpus=args.num_cpus, include_dashboard=False,
                     logging_level=logging.WARNING, log_to_driver=False)
        except Exception as exc:           # ConnectionError, ValueError, RuntimeError ...
            return distributed.fail("cannot start or reach Ray: %s" % exc)
        raise_on_terminate()               # ray.init set a SIGTERM handler of its own
        try:
            failures = run_tasks(ray, args, ranges, there, count)
        finally:
            ray.shutdown()
        if failures:
            return distributed.failed(failures, args.retries)
    return distributed.complete(args)


def run_tasks(ray, args, ranges, there, count):
    """One task per range, retried by Ray -> the lines of the tasks that failed
    every attempt."""
    task = ray.remote(build_range).options(num_cpus=args.workers, max_retries=args.retries,
                                           retry_exceptions=True)
    distributed.say(distributed.plan_line(args, ranges, there, count,
                                          ray.cluster_resources().get("CPU", 0)))
    argv = distributed.builder_argv(args, absolute=True)
    fault = os.environ.get(distributed.FAULT_ENV)          # a test hook
    pending = {task.remote(ROOT, argv, a, b, fault): (a, b) for a, b in ranges}
    failures = []
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            first, last = pending.pop(done[0])
            try:
                distributed.say(distributed.task_done(first, last, ray.get(done[0])))
            except Exception as exc:       # every attempt failed: RayTaskError, WorkerCrashedError
                failures.append(distributed.task_failure(first, last, exc))
                distributed.say("failed         " + failures[-1])
    finally:
        for ref in pending:                # Ctrl-C, SIGTERM: stop the others
            try:
                ray.cancel(ref, force=True)
            except Exception:              # finished meanwhile
                pass
    return failures


if __name__ == "__main__":
    sys.exit(run_command(main))

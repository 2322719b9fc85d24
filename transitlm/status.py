"""Exit statuses of the tools and the errors that stop a whole run.

Standard library only; Python 3.8+.
"""

EXIT_OK = 0
EXIT_WORKER = 1                  # a worker process died (killed by a signal)
EXIT_USAGE = 2                   # usage or input-file problem
EXIT_SERVICE = 3                 # route-eval service unreachable (general LLM)


class ServiceError(Exception):
    """The route-eval service stayed unreachable: the run stops (exit status 3)."""


class WorkerFailed(Exception):
    """A worker process of --workers died (killed by a signal, the out-of-memory
    killer): the run stops (exit status 1)."""

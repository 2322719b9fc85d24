"""Forked worker processes fed through pipes, results taken in submission order.

What the evaluators' ``--workers`` runs on, in place of multiprocessing.Pool:

- no helper threads in the main process: it reads and hashes the input and
  writes the outputs on the same two cores the workers use, and Pool's three
  threads (tasks, results, worker upkeep) cost it about a third of its time;
- a worker that dies (the out-of-memory killer, a signal) stops the run with
  WorkerFailure naming how it ended -- Pool replaces the process and waits
  for the lost task's result for ever;
- tasks and results of any size cannot deadlock: this process writes tasks
  and reads results without blocking, whichever of the two the pipes allow.

A worker is a fork of this process, so ``function`` and everything it reads
(the loaded station network) are inherited, not sent.  Tasks and results are
pickled.  Each message on a pipe is an 8-byte length, then the pickle.

Below the pool, what the evaluators give it: the tasks of a sample file
(chunks of its bytes, or of its rows), what a worker does with one
(``_evaluate_task``) and ``evaluate_in_workers``, which streams a file's
tasks through the pool and adds their outputs in input order.
"""

import collections
import errno
import os
import pickle
import select
import signal
import struct
import traceback

from common import InputError
from transitlm.io.exit_status import WorkerFailed
from transitlm.evaluation.inputs import SampleRow, SplitRecord, parse_chunk, read_span

_LENGTH = struct.Struct("<Q")
_READ_SIZE = 1 << 20


class WorkerFailure(Exception):
    """A worker process ended before it was told to (killed, or exited)."""


class WorkerError(RuntimeError):
    """``function`` raised in a worker; the message holds its traceback."""


def how_it_ended(status):
    """A waitpid status in words: "was killed by signal 9 (SIGKILL)", "exited with status 1"."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = " (%s)" % signal.Signals(number).name
        except ValueError:
            name = ""
        return "was killed by signal %d%s" % (number, name)
    if os.WIFEXITED(status):
        return "exited with status %d" % os.WEXITSTATUS(status)
    return "ended (wait status %d)" % status


def _read_exactly(fd, size):
    """``size`` bytes from a blocking descriptor, or None at end of file."""
    parts = []
    while size > 0:
        data = os.read(fd, min(size, _READ_SIZE))
        if not data:
            return None
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _serve(function, tasks_fd, results_fd):
    """A worker's life: task in, result (or the traceback) out, until the
    task pipe closes.  Never returns: a fork must not run the parent's code on."""
    status = 0
    try:
        # Ctrl-C reaches the whole process group: the main process handles it
        # and ends its workers.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            head = _read_exactly(tasks_fd, _LENGTH.size)
            if head is None:
                break
            task = pickle.loads(_read_exactly(tasks_fd, _LENGTH.unpack(head)[0]))
            try:
                message = (True, function(task))
            except BaseException:      # a bug: the main process shows where
                message = (False, traceback.format_exc())
            data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
            _write_all(results_fd, _LENGTH.pack(len(data)) + data)
    except BaseException:              # the main process went away (EPIPE), ...
        status = 1
    finally:
        os._exit(status)


class _Worker(object):
    __slots__ = ("pid", "tasks_fd", "results_fd", "unsent", "received", "sequences")

    def __init__(self, pid, tasks_fd, results_fd):
        self.pid = pid
        self.tasks_fd = tasks_fd       # our end: non-blocking writes
        self.results_fd = results_fd   # our end: non-blocking reads
        self.unsent = bytearray()      # task bytes the pipe did not take yet
        self.received = bytearray()    # result bytes not yet a whole message
        self.sequences = collections.deque()   # its tasks not yet answered, in order


class ForkedWorkers(object):
    """``count`` forked processes applying ``function`` to submitted tasks.

    submit(task) hands a task to the least busy worker; result() returns the
    result of the oldest submitted task not yet taken (waiting for it);
    discard() forgets every submitted task not yet taken.  Use it as a
    context manager: leaving it ends the workers (at once, on an error).
    """

    def __init__(self, count, function):
        if count < 1:
            raise ValueError("count must be at least 1")
        self._workers = []
        self._poll = select.poll()
        self._by_fd = {}
        self._next_sequence = 0        # of the next submitted task
        self._wanted = collections.deque()   # sequences submitted and not taken
        self._results = {}             # sequence -> result, arrived early
        self._discarded = set()
        try:
            for _ in range(count):
                self._start(function)
        except BaseException:
            self.close(kill=True)
            raise

    def _start(self, function):
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        pid = os.fork()
        if pid == 0:                   # the worker
            os.close(tasks_write)
            os.close(results_read)
            # Not the other workers' pipe ends: they would keep those pipes
            # open after the main process closes them, and the workers alive.
            for worker in self._workers:
                os.close(worker.tasks_fd)
                os.close(worker.results_fd)
            _serve(function, tasks_read, results_write)
        os.close(tasks_read)
        os.close(results_write)
        os.set_blocking(tasks_write, False)
        os.set_blocking(results_read, False)
        worker = _Worker(pid, tasks_write, results_read)
        self._workers.append(worker)
        self._by_fd[tasks_write] = worker
        self._by_fd[results_read] = worker
        self._poll.register(results_read, select.POLLIN)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        self.close(kill=kind is not None)

    @property
    def busy(self):
        """Tasks submitted and not yet taken with result()."""
        return len(self._wanted)

    def submit(self, task):
        worker = min(self._workers, key=lambda worker: len(worker.sequences))
        data = pickle.dumps(task, pickle.HIGHEST_PROTOCOL)
        sequence = self._next_sequence
        self._next_sequence += 1
        worker.sequences.append(sequence)
        self._wanted.append(sequence)
        worker.unsent += _LENGTH.pack(len(data))
        worker.unsent += data
        self._send(worker)

    def result(self):
        """The result of the oldest task not taken yet (WorkerError if it raised)."""
        if not self._wanted:
            raise ValueError("no task is waiting for its result")
        sequence = self._wanted[0]
        while sequence not in self._results:
            self._pump()
        self._wanted.popleft()
        ok, value = self._results.pop(sequence)
        if not ok:
            raise WorkerError("a worker process raised an exception:\n" + value.rstrip())
        return value

    def discard(self):
        """Forget the tasks not taken yet: their results are dropped as they come."""
        self._discarded.update(self._wanted)
        for sequence in self._wanted:
            self._results.pop(sequence, None)
        self._wanted.clear()

    # -- moving bytes ------------------------------------------------------

    def _send(self, worker):
        """Write what the task pipe takes now; poll for more room while bytes wait."""
        try:
            written = os.write(worker.tasks_fd, worker.unsent)
        except BlockingIOError:
            written = 0
        except BrokenPipeError:
            self._failed(worker)
        del worker.unsent[:written]
        if worker.unsent:
            self._poll.register(worker.tasks_fd, select.POLLOUT)
        else:
            try:
                self._poll.unregister(worker.tasks_fd)
            except KeyError:
                pass

    def _pump(self):
        """Wait until some pipe is ready, then move what it allows."""
        while True:
            try:
                events = self._poll.poll()
                break
            except InterruptedError:   # pragma: no cover (PEP 475 retries)
                continue
        for fd, event in events:
            worker = self._by_fd[fd]
            if fd == worker.tasks_fd:
                if event & (select.POLLERR | select.POLLHUP):
                    self._failed(worker)
                self._send(worker)
            else:
                self._receive(worker)

    def _receive(self, worker):
        try:
            data = os.read(worker.results_fd, _READ_SIZE)
        except BlockingIOError:
            return
        if not data:                   # the worker is gone
            self._failed(worker)
        received = worker.received
        received += data
        while len(received) >= _LENGTH.size:
            size = _LENGTH.unpack_from(received)[0]
            end = _LENGTH.size + size
            if len(received) < end:
                break
            # A copy, not a view: a view left alive would stop the del below.
            message = pickle.loads(received[_LENGTH.size:end])
            del received[:end]
            sequence = worker.sequences.popleft()
            if sequence in self._discarded:
                self._discarded.discard(sequence)
            else:
                self._results[sequence] = message

    def _failed(self, worker):
        """A worker's pipe closed under us: say how the process ended."""
        pid, worker.pid = worker.pid, None
        try:
            ended = how_it_ended(os.waitpid(pid, 0)[1])
        except ChildProcessError:
            ended = "ended"
        raise WorkerFailure("worker process %d %s" % (pid, ended))

    def close(self, kill=False):
        """End the workers: close their task pipes (they finish and exit) and
        wait for them; ``kill`` ends them at once (after an error)."""
        workers, self._workers = self._workers, []
        for worker in workers:
            if kill and worker.pid is not None:
                try:
                    os.kill(worker.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for fd in (worker.tasks_fd, worker.results_fd):
                try:
                    os.close(fd)
                except OSError as exc:
                    if exc.errno != errno.EBADF:
                        raise
        for worker in workers:
            if worker.pid is not None:
                try:
                    os.waitpid(worker.pid, 0)
                except ChildProcessError:
                    pass
                worker.pid = None


# ---------------------------------------------------------------------------
# The evaluators' --workers: tasks of the sample file, fed to ForkedWorkers
# ---------------------------------------------------------------------------

MIN_ROWS_PER_WORKER = 500        # below this a worker costs more than it saves
CHUNK_ROWS = 1000                # rows a worker evaluates per task (read row by row)
_FORKED = None                   # (judge, sinks, sample file layout) inherited by workers
# The layout is (path, columns, width, file descriptor or None): see _evaluate_task.


def can_fork():
    """Can --workers fork worker processes here (ForkedWorkers needs fork and poll)?"""
    return hasattr(os, "fork") and hasattr(select, "poll")


# The builders' --workers 0 (make_benchmark.py's and make_dataset.py's
# default): one worker per CPU core, at most this many (each holds its own
# copy of what the router fills in: on a 38,000-station network about 100 MB
# for benchmark rows, 250 MB for corpus sessions).
DEFAULT_BUILD_WORKERS = 8


def available_cores():
    """The CPU cores this process may run on (its affinity, which a container
    or a batch scheduler may narrow; else the machine's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build_worker_count(asked):
    """The builders' --workers: 0 is one per available core, at most DEFAULT_BUILD_WORKERS."""
    return asked or max(1, min(DEFAULT_BUILD_WORKERS, available_cores()))


def _evaluate_task(task):
    """Worker: evaluate one task -> the chunk's outputs (RowSinks.render_chunk
    plus the context's tally), None when a chunk ("bytes" or "span") did not
    end at the end of a record, or the message of an input-file error.

    A task is ("rows", SampleRow states), ("bytes", data, first line, final)
    (a chunk of the sample file that the worker parses itself: parse_chunk)
    or ("span", offset, length, first line, final): such a chunk, which the
    worker reads from the file itself (the descriptor it inherited).
    """
    judge, sinks, layout = _FORKED
    judge.context.tally = {}
    try:
        if task[0] == "span":
            path, columns, width, fd = layout
            data = read_span(fd, task[1], task[2])
            if len(data) != task[2]:
                return ("input file %s changed while it was evaluated (it is shorter "
                        "now); run again on a file that is not being written" % path)
            samples = parse_chunk(data, task[3], path, columns, width, final=task[4])
        elif task[0] == "bytes":
            samples = parse_chunk(task[1], task[2], *layout[:3], final=task[3])
        else:
            samples = map(SampleRow.from_state, task[1])
        outputs = sinks.render_chunk(judge.records(samples))
    except SplitRecord:
        return None
    except InputError as exc:
        return str(exc)
    return outputs + (judge.context.tally,)


def row_tasks(samples):
    """SampleRows -> (task, None) pairs of CHUNK_ROWS rows each."""
    chunk = []
    for sample in samples:
        chunk.append(sample.state())
        if len(chunk) == CHUNK_ROWS:
            yield ("rows", chunk), None
            chunk = []
    if chunk:
        yield ("rows", chunk), None


def byte_tasks(chunks, spans=False):
    """SampleReader.chunks() -> (task, chunk) pairs: the chunk's bytes sent to
    the worker, or only where they lie in the file (``spans``: see span_file)."""
    for chunk in chunks:
        data, first_line, final, offset = chunk
        if spans:
            yield ("span", offset, len(data), first_line, final), chunk
        else:
            yield ("bytes", data, first_line, final), chunk


def evaluate_in_workers(judge, tasks, sinks, progress, workers, reader=None):
    """Stream tasks (see _evaluate_task) through ``workers`` forked processes.

    This process hands out the tasks (at most two per worker in flight, so
    memory stays bounded) and adds every chunk's outputs in input order, so
    every output is byte-identical to a single-process run.  With "bytes"
    and "span" tasks it only reads and hashes the file: the workers parse
    it (and, for "span" tasks, read their chunk from the file themselves, so
    it is not sent through a pipe).  ``tasks`` yields (task, chunk) pairs
    (byte_tasks, row_tasks).  When a
    chunk turns out not to end at a record's end, the file is cut again from
    that chunk's first byte (``reader``'s recut) or, if that was done
    already, read row by row from there (rows_from).  The workers
    inherit the loaded network.  Returns False (nothing consumed) when no
    process pool can be made here.
    """
    global _FORKED
    layout = None
    if reader is not None:
        layout = (reader.path, reader.columns, reader.width, reader.span_file())
    _FORKED = (judge, sinks, layout)
    chunks_sent = collections.deque()   # the chunk of every task in flight, in order
    rows_done = 0
    try:
        pool = ForkedWorkers(workers, _evaluate_task)
    except OSError:                   # no more processes here: one process
        _FORKED = None
        return False
    try:
        with pool:
            while True:
                while pool.busy < 2 * workers:
                    task, chunk = next(tasks, (None, None))
                    if task is None:
                        break
                    pool.submit(task)
                    chunks_sent.append(chunk)
                if not pool.busy:
                    break
                outputs = pool.result()
                chunk = chunks_sent.popleft()
                if outputs is None:
                    # A record runs past this chunk (a line break inside a
                    # cell): from its first byte on, cut where the quotes are
                    # even or, if they already were, read row by row.
                    unread = [chunk] + list(chunks_sent)
                    chunks_sent.clear()
                    pool.discard()
                    chunks = reader.recut(unread)
                    tasks = (byte_tasks(chunks, layout[3] is not None) if chunks is not None
                             else row_tasks(reader.rows_from(unread, rows_done + 1)))
                    continue
                if isinstance(outputs, str):
                    raise InputError(outputs)
                rows, details, failures, totals, tally = outputs
                sinks.add_chunk(rows, details, failures, totals,
                                rows_done if chunk is not None else 0)
                rows_done += len(rows)
                for key, amount in tally.items():
                    judge.context.count(key, amount)
                progress.step(len(rows))
    except WorkerFailure as exc:
        raise WorkerFailed("%s while evaluating (out of memory?); nothing was written: run "
                           "again, or with --workers 1" % exc)
    finally:
        _FORKED = None
    return True

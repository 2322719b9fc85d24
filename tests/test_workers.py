"""--workers: the same records and reports from several processes as from one."""

import json
import os
import tempfile
import unittest

from tests.support import chunked_runs, common
from tests.support.evaluator_rows import run_evaluator
from tests.support.lane import Offloaded
import transitlm.evaluation.engine
import transitlm.evaluation.workers  # noqa: E402
import transitlm.evaluation.inputs  # noqa: E402
import transitlm.evaluation.records  # noqa: E402
import transitlm.evaluation.reports  # noqa: E402
from single_route.evaluate import SingleRoute
from diversity.evaluate import Diversity
from general_llm.evaluate import GeneralLLM

GENERATED = chunked_runs.GENERATED
BUNDLED = chunked_runs.BUNDLED

# The many-run comparisons (tests/support/chunked_runs.py), started as the
# module loads, in a process of their own beside the suite
# (tests.support.Offloaded).
CAN_RUN_PARITY = os.path.isdir(GENERATED) and transitlm.evaluation.workers.can_fork()
PARITY_RUNS = (Offloaded("tests.support.chunked_runs:parity_runs_by_one_and_two")
               if CAN_RUN_PARITY else None)
CAN_FORK = transitlm.evaluation.workers.can_fork()
BUNDLED_RUNS = Offloaded("tests.support.chunked_runs:bundled_runs") if CAN_FORK else None
EVERY_BENCHMARK_RUNS = (Offloaded("tests.support.chunked_runs:every_benchmark_runs")
                        if CAN_FORK else None)
ODD_CSV_RUNS = Offloaded("tests.support.chunked_runs:odd_csv_runs") if CAN_FORK else None


@unittest.skipUnless(os.path.isdir(GENERATED), "../shared/parity is not available")
@unittest.skipUnless(transitlm.evaluation.workers.can_fork(), "no fork on this platform")
class Workers(unittest.TestCase):
    def test_identical_outputs(self):
        runs = PARITY_RUNS.result()
        self.assertEqual([name for name, _, _ in runs],
                         [SingleRoute.name, Diversity.name, GeneralLLM.name])
        for name, one, two in runs:
            with self.subTest(benchmark=name):
                for outputs in (one, two):
                    self.assertEqual(len(outputs), 3, "the run failed: %s" % (outputs,))
                self.assertEqual(one, two)
                self.assertEqual(one[1].count("\n"), 1200)




class ChunkHelpers(unittest.TestCase):
    """The pure helpers of chunked reading, by hand."""

    def test_csv_lines(self):
        self.assertEqual(transitlm.evaluation.inputs.csv_lines(b""), 0)
        self.assertEqual(transitlm.evaluation.inputs.csv_lines(b"a\nb\n"), 2)
        self.assertEqual(transitlm.evaluation.inputs.csv_lines(b"a\r\nb\r\n"), 2)
        self.assertEqual(transitlm.evaluation.inputs.csv_lines(b"a\rb\r\nc\n"), 3)      # a lone \r ends a line too

    def test_count_sparse(self):
        self.assertEqual(transitlm.evaluation.inputs.count_sparse(b"", b"\n"), 0)
        self.assertEqual(transitlm.evaluation.inputs.count_sparse(b"abc", b"\n"), 0)
        self.assertEqual(transitlm.evaluation.inputs.count_sparse(b"\n", b"\n"), 1)
        data = b"x\ny\r\n\n" * 50
        for steps in (1, 2, 3, 99, 1000):       # counted with data.count after `steps` hits
            with self.subTest(steps=steps):
                self.assertEqual(transitlm.evaluation.inputs.count_sparse(data, b"\n", steps), 150)

    def test_lone_returns(self):
        self.assertEqual(transitlm.evaluation.inputs.lone_returns(b""), 0)
        self.assertEqual(transitlm.evaluation.inputs.lone_returns(b"\r"), 1)
        self.assertEqual(transitlm.evaluation.inputs.lone_returns(b"\r\n"), 0)
        self.assertEqual(transitlm.evaluation.inputs.lone_returns(b"a\r\rb\r\n\n\r"), 3)
        data = b"a\r\rb\r\n\n\r" * 40
        for steps in (1, 2, 3, 4, 99, 1000):
            with self.subTest(steps=steps):
                self.assertEqual(transitlm.evaluation.inputs.lone_returns(data, steps), 120)

    def test_text_lines_are_the_csv_modules_lines(self):
        import io
        texts = ["", "a", "a\n", "a\nb", "a\r\nb\r\n", "\n\n", "a\r\n\r\nb",
                 # characters str.splitlines() would also break at: not line breaks here
                 'x,"a\u2028b\x85c\x0cd\x1ce"\ny\n', "\u2029\n\v"]
        for text in texts:
            with self.subTest(text=text):
                self.assertEqual(transitlm.evaluation.inputs.text_lines(text, False),
                                 list(io.StringIO(text, newline="")))
        # A lone \r ends a line too: then the lines come from io.StringIO.
        self.assertEqual(list(transitlm.evaluation.inputs.text_lines("a\rb\r\nc", True)), ["a\r", "b\r\n", "c"])

    def test_record_end(self):
        self.assertEqual(transitlm.evaluation.inputs.record_end(b""), -1)
        self.assertEqual(transitlm.evaluation.inputs.record_end(b"abc"), -1)
        self.assertEqual(transitlm.evaluation.inputs.record_end(b"a\nb\nc"), 4)
        # The last line break is inside a quoted cell: the one before it.
        self.assertEqual(transitlm.evaluation.inputs.record_end(b'a\n"b\nc'), 2)
        self.assertEqual(transitlm.evaluation.inputs.record_end(b'"x\ny"\n"b\nc'), 6)
        self.assertEqual(transitlm.evaluation.inputs.record_end(b'"a\nb'), -1)
        # Counted from ``start``.
        self.assertEqual(transitlm.evaluation.inputs.record_end(b'"\nx\n', 1), 4)

    def test_details_parts_are_json_dumps(self):
        import json
        records = [{"row": 3}, {"a": 1, "row": 7}, {"row": 12, "z": [1, "x"]},
                   {"city": "北京", "row": 1, "status": "error", "error": "\ud800"},
                   {"row": 2, "score": float("nan"), "a": "\x1b[31m"},
                   # A value that holds the row mark: the parts are made key by key.
                   {"error": transitlm.evaluation.reports._ROW_MARK, "row": 4, "z": transitlm.evaluation.reports._ROW_MARK}]
        for record in records:
            with self.subTest(record=record):
                safe = transitlm.evaluation.reports.finite_or_none(record)
                try:
                    text = json.dumps(safe, ensure_ascii=False, sort_keys=True)
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    text = json.dumps(safe, ensure_ascii=True, sort_keys=True)
                self.assertEqual(transitlm.evaluation.reports.details_bytes(record), text.encode("utf-8") + b"\n")
                head, tail = transitlm.evaluation.reports.details_parts(record)
                self.assertEqual(transitlm.evaluation.reports.details_line(head, 41, tail),
                                 transitlm.evaluation.reports.details_bytes(dict(record, row=41)))
                self.assertEqual(transitlm.evaluation.reports._details_parts_by_keys(record), (head, tail))

    def test_failure_line_parts(self):
        record = {"row": 5, "index_id": "x\x1by", "status": "error", "error": "bad"}
        self.assertEqual(transitlm.evaluation.reports.failure_line(record), "  row 5      x\\x1by  error: bad\n")
        self.assertEqual(transitlm.evaluation.reports.failure_line_for(1234567, transitlm.evaluation.reports.failure_text(record)),
                         "  row 1234567 x\\x1by  error: bad\n")

    def test_parse_chunk_finds_a_split_record(self):
        layout = ("f.csv", (0, 1, 2, 3, None), 4)
        rows = list(transitlm.evaluation.inputs.parse_chunk(b'a,b,c,d\ne,f,g,h\n', 2, *layout, final=False))
        self.assertEqual([row.index_id for row in rows], ["a", "e"])
        self.assertEqual(rows[1].row, 2)
        with self.assertRaises(transitlm.evaluation.inputs.SplitRecord):
            list(transitlm.evaluation.inputs.parse_chunk(b'a,b,c,d\ne,"f\n', 2, *layout, final=False))
        # The file's last chunk may end inside a quote: that is the row as read.
        last = list(transitlm.evaluation.inputs.parse_chunk(b'a,b,c,d\ne,"f\n', 2, *layout, final=True))
        self.assertEqual(last[1].prediction, "")
        self.assertEqual(last[1].problem[0], "malformed_row")


@unittest.skipUnless(transitlm.evaluation.workers.can_fork(), "no fork on this platform")
class ChunkedReading(unittest.TestCase):
    """Workers that read their own chunks of the file give the same outputs as one
    process, whatever the chunk size and however odd the CSV."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.saved = transitlm.evaluation.inputs.CHUNK_BYTES

    def tearDown(self):
        transitlm.evaluation.inputs.CHUNK_BYTES = self.saved
        self.tmp.cleanup()

    def outputs(self, sample, workers, chunk_bytes=None, benchmark=None, extra=(),
                by_rows=False):
        """``by_rows``: one process reading the file row by row (not in chunks)."""
        return chunked_runs.outputs(self.tmp.name, sample, workers, chunk_bytes, benchmark,
                                    extra, by_rows)

    def write(self, name, data):
        return chunked_runs.write(self.tmp.name, name, data)

    def bundled(self):
        return chunked_runs.bundled()

    def check_same(self, one, chunked):
        for chunk_bytes, workers, outputs in chunked:
            with self.subTest(chunk_bytes=chunk_bytes, workers=workers):
                self.assertEqual(outputs, one)
        self.assertEqual(len(chunked), 2 * len(chunked_runs.CHUNK_SIZES))

    def assert_same(self, data, name="s.csv"):
        # The file read row by row in one process; in chunks by the workers
        # and, as a worker reads them, by one process.
        one, chunked = chunked_runs.same_outputs(self.tmp.name, data, name)
        self.check_same(one, chunked)
        return one

    def test_every_benchmark_in_small_chunks(self):
        # Totals merged chunk by chunk (Aggregate.merge) add the same numbers in
        # the same order as one process: reports equal byte for byte.
        runs = EVERY_BENCHMARK_RUNS.result()
        self.assertEqual([name for name, _, _ in runs],
                         ["personalized", Diversity.name, GeneralLLM.name])
        for name, one, chunked in runs:
            with self.subTest(benchmark=name):
                self.assertEqual(len(one), 3, "the run failed: %s" % (one,))
                for chunk_bytes, workers, outputs in chunked:
                    self.assertEqual(outputs, one, (chunk_bytes, workers))
                self.assertEqual(len(chunked), 4)

    def test_bundled_rows_in_small_chunks(self):
        one, chunked = BUNDLED_RUNS.result()
        self.check_same(one, chunked)
        report, details, _ = one
        self.assertEqual(details.count("\n"), 38)

    def test_odd_csv(self):
        runs = ODD_CSV_RUNS.result()
        self.assertEqual(sorted(runs), sorted(chunked_runs.odd_csv_variants()))
        for name, (one, chunked) in runs.items():
            with self.subTest(variant=name):
                self.check_same(one, chunked)

    def spy_on(self, name):
        """Record the calls of SampleReader.<name> (their arguments after self)."""
        calls = []
        original = getattr(transitlm.evaluation.inputs.SampleReader, name)

        def spy(reader, *args):
            calls.append(args)
            return original(reader, *args)
        setattr(transitlm.evaluation.inputs.SampleReader, name, spy)
        self.addCleanup(setattr, transitlm.evaluation.inputs.SampleReader, name, original)
        return calls

    def test_line_break_in_a_cell_cuts_again(self):
        # Chunks are first cut at any line break; a cell holding line breaks
        # makes a worker find its chunk cut inside a record, and from that
        # chunk on the file is cut by the quote count, still by the workers.
        data = self.bundled()
        header, _, body = data.partition(b"\n")
        lines = body.split(b"\n")
        cells = lines[12].split(b",", 1)
        multi = header + b"\n" + b"\n".join(lines[:12]) + b"\n" + cells[0] \
            + b'-m,"{}","' + b"\n".join([b"line"] * 300) + b'",x\n' + b"\n".join(lines[12:])
        recuts = self.spy_on("recut")
        rows_from = self.spy_on("rows_from")
        report, details, _ = self.assert_same(multi, "multi.csv")
        self.assertEqual(details.count("\n"), 39)
        self.assertTrue(recuts, "no chunk was found cut inside a record")
        self.assertEqual([args for args in rows_from if args[1] > 1], [],
                         "the quote count was right: no row-by-row reading was needed")

    def test_wrong_guess_goes_back_to_rows(self):
        # Every line break but the last is inside one quoted cell, and a quote
        # inside an unquoted cell before it throws the quote count off: the
        # chunks are cut inside the record twice, by any line break and by the
        # quote count, and then the file is read row by row from there.
        data = self.bundled()
        header, _, body = data.partition(b"\n")
        lines = body.split(b"\n")
        odd = header + b"\n" + b"\n".join(lines[:10]) + b"\n" + b'x"y,' \
            + lines[10][lines[10].index(b",") + 1:] + b"\n" \
            + b'id-m,"{}","' + b"\n".join([b"line"] * 300) + b'",x\n' + b"\n".join(lines[11:])
        recuts = self.spy_on("recut")
        calls = self.spy_on("rows_from")
        self.assert_same(odd, "odd.csv")
        self.assertTrue(recuts, "the chunk ends were never found wrong")
        # Called with the first row of the chunk that was cut wrong (not row 1:
        # that is a file too small for workers).
        self.assertTrue([args for args in calls if args[1] > 1],
                        "the quote count was never found wrong")

    def test_workers_read_their_chunks_from_a_regular_file(self):
        # A regular file: workers get where their chunk lies (span tasks) and
        # read it themselves; the outputs are those of one process.
        spans = []
        original = transitlm.evaluation.workers.byte_tasks

        def spy(chunks, spans_wanted=False):
            spans.append(spans_wanted)
            return original(chunks, spans_wanted)
        transitlm.evaluation.workers.byte_tasks = spy
        self.addCleanup(setattr, transitlm.evaluation.workers, "byte_tasks", original)
        self.assert_same(self.bundled())
        self.assertEqual(set(spans), {True})

    def file_changed_during_the_run(self, change):
        """Run two workers on a copy of the bundled file, calling change(path)
        once the first chunks have been handed out -> (status, stderr)."""
        sample = self.write("changing.csv", self.bundled())
        original = transitlm.evaluation.inputs.SampleReader.chunks

        def chunks(reader):
            for count, chunk in enumerate(original(reader)):
                if count == 3:
                    change(sample)
                yield chunk
        transitlm.evaluation.inputs.SampleReader.chunks = chunks
        self.addCleanup(setattr, transitlm.evaluation.inputs.SampleReader, "chunks", original)
        return self.outputs(sample, 2, 400)

    def test_a_file_written_during_the_run_is_refused(self):
        def append(path):
            with open(path, "ab") as handle:
                handle.write(b"more,rows\n")
        status, err = self.file_changed_during_the_run(append)
        self.assertEqual(status, 2)
        self.assertRegex(err, r"^error: input file .*changing\.csv changed while it was evaluated; "
                              r"run again on a file that is not being written\n$")

    def test_a_killed_worker_stops_the_run_with_a_message(self):
        # The out-of-memory killer, say: exit status 1, one line naming the
        # signal, and no output file (multiprocessing.Pool waited for ever).
        import signal
        original = transitlm.evaluation.workers._evaluate_task

        def dies_past_line_20(task):       # ("span", offset, length, first line, final)
            if task[3] > 20:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(task)
        transitlm.evaluation.workers._evaluate_task = dies_past_line_20
        self.addCleanup(setattr, transitlm.evaluation.workers, "_evaluate_task", original)
        sample = self.write("s.csv", self.bundled())
        status, err = self.outputs(sample, 2, 400)
        self.assertEqual(status, 1)
        self.assertRegex(err, r"^error: worker process \d+ was killed by signal 9 \(SIGKILL\) "
                              r"while evaluating \(out of memory\?\); nothing was written: "
                              r"run again, or with --workers 1\n$")
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["s.csv"])

    def test_a_file_cut_short_during_the_run_is_refused(self):
        def truncate(path):
            os.truncate(path, 100)
        status, err = self.file_changed_during_the_run(truncate)
        self.assertEqual(status, 2)
        self.assertRegex(err, r"^error: input file .*changing\.csv changed while it was evaluated "
                              r"\(it is shorter now\)")
        self.assertEqual(err.count("\n"), 1)

    def test_read_span(self):
        path = self.write("span.bin", b"0123456789")
        with open(path, "rb") as handle:
            fd = handle.fileno()
            self.assertEqual(transitlm.evaluation.inputs.read_span(fd, 2, 3), b"234")
            self.assertEqual(transitlm.evaluation.inputs.read_span(fd, 8, 5), b"89")     # the file ends first
            self.assertEqual(transitlm.evaluation.inputs.read_span(fd, 20, 5), b"")
            self.assertEqual(transitlm.evaluation.inputs.read_span(fd, 0, 0), b"")
            self.assertEqual(handle.read(), b"0123456789")         # position untouched

    def test_input_error_names_the_line(self):
        # A file-level error found by a worker stops the run with its line.
        data = self.bundled()
        header, _, body = data.partition(b"\n")
        lines = body.split(b"\n")
        sample = self.write("nul.csv", header + b"\n" + b"\n".join(lines[:20]) + b"\x00\n"
                            + b"\n".join(lines[20:]))
        one = self.outputs(sample, 1)
        two = self.outputs(sample, 2, 97)
        self.assertEqual(one, two)

    def test_pipe(self):
        import subprocess
        import sys
        data = self.bundled()
        script = os.path.join(os.path.dirname(BUNDLED), "single_route", "evaluate.py")
        code = ("import transitlm.evaluation.inputs, runpy, sys; transitlm.evaluation.inputs.CHUNK_BYTES = 300; "
                "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
        outputs = []
        for workers in ("1", "2"):
            done = subprocess.run(
                [sys.executable, "-c", code, script, "--input", "/dev/stdin", "--station_info",
                 os.path.join(BUNDLED, "station_info.csv"), "--workers", workers,
                 "--json", "-"], input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=os.path.dirname(BUNDLED))
            self.assertEqual(done.returncode, 0, done.stderr)
            outputs.append(done.stdout.decode().replace('"workers": ' + workers, '"workers": N'))
        self.assertEqual(outputs[0], outputs[1])
        self.assertIn('"samples": 38', outputs[0])


class RouteDrawings(unittest.TestCase):
    """The routes as judged (prediction_routes, label_routes) are built only
    for an output that shows them; every other output is the same either way."""

    def test_outputs_equal_with_and_without_details(self):
        from personalized.evaluate import Personalized
        cases = ((SingleRoute(), "benchmark1_single_route_example.csv", ()),
                 (Personalized(), "benchmark2_personalized_example.csv", ()),
                 (Diversity(), "benchmark3_diversity_example.csv", ()),
                 (GeneralLLM(), "general_llm_example.csv",
                  ("--line_info", os.path.join(BUNDLED, "line_info.csv"))))
        with tempfile.TemporaryDirectory() as tmp:
            for benchmark, name, extra in cases:
                for workers in ("1", "2"):
                    with self.subTest(benchmark=benchmark.name, workers=workers):
                        base = ["--input", os.path.join(BUNDLED, name), "--station_info",
                                os.path.join(BUNDLED, "station_info.csv"),
                                "--workers", workers] + list(extra)
                        reports = []
                        for details in (None, os.path.join(tmp, "d.jsonl")):
                            report = os.path.join(tmp, "r.json")
                            argv = base + ["--json", report]
                            if details:
                                argv += ["--details", details]
                            status, stdout, err = run_evaluator(benchmark, argv)
                            self.assertEqual(status, 0, err)
                            with open(report, encoding="utf-8") as handle:
                                reports.append((handle.read(), stdout))
                        self.assertEqual(reports[0], reports[1])
                        with open(details, encoding="utf-8") as handle:
                            records = [json.loads(line) for line in handle]
                        drawn = [r for r in records if r["status"] == "evaluated"]
                        self.assertTrue(drawn)
                        for record in drawn:
                            self.assertTrue(record["prediction_routes"])

    def test_context_decides(self):
        network = common.StationNetwork.from_dict({"A": (0.0, 0.0, ["B"]),
                                                   "B": (0.001, 0.0, ["A"])})
        label = {"station_sequence": ["A", "B"], "line_sequence": ["L1"]}
        row = transitlm.evaluation.engine.DecodedRow(transitlm.evaluation.inputs.SampleRow(1, "id", "", "", ""), (0.0, 0.0),
                                (0.001, 0.0), "", label, dict(label))
        context = transitlm.evaluation.engine.Context(transitlm.evaluation.engine.Options(SingleRoute()), common.REFERENCE, network)
        self.assertIn("prediction_routes", SingleRoute().evaluate(row, context))
        context.route_drawings = False
        fields = SingleRoute().evaluate(row, context)
        self.assertNotIn("prediction_routes", fields)
        self.assertNotIn("label_routes", fields)
        self.assertTrue(fields["exact_match"])


class DeferredTotals(unittest.TestCase):
    """A worker's totals record what they add; the parent adds it in order."""

    def test_merge_adds_in_order(self):
        # (1e16 + 1) - 1e16 is 0.0 in floats; any other order gives 1.0.
        self.assertEqual(transitlm.evaluation.records._merge_totals(0, [1e16, 1.0, -1e16]), 0.0)
        self.assertEqual(transitlm.evaluation.records._merge_totals({"a": 1}, {"a": [True, 2], "b": 3}),
                         {"a": 4, "b": 3})
        self.assertEqual(transitlm.evaluation.records._merge_totals([0, 0.5], ([1], [0.25, 0.25])), [1, 1.0])
        with self.assertRaises(TypeError):        # a float added out of order
            transitlm.evaluation.records._merge_totals(0, 0.5)

    def test_aggregate_merge_equals_one_fold(self):
        from tests.support.evaluator_rows import evaluate_to_files
        with tempfile.TemporaryDirectory() as folder:
            _, records, _ = evaluate_to_files(SingleRoute(), [
                "--input", os.path.join(BUNDLED, "benchmark1_single_route_example.csv"),
                "--station_info", os.path.join(BUNDLED, "station_info.csv")], folder)
        from common import PROTOCOLS
        one = transitlm.evaluation.records.Aggregate(SingleRoute(), PROTOCOLS["reference"])
        merged = transitlm.evaluation.records.Aggregate(SingleRoute(), PROTOCOLS["reference"])
        for start in range(0, len(records), 5):
            part = merged.deferred()
            for record in records[start:start + 5]:
                one.add(record)
                part.add(record)
            merged.merge(part.state())
        self.assertEqual(merged.figures(), one.figures())
        self.assertEqual(one.figures()["counts"]["samples"], 38)

"""transitlm.generate.runner on its files: the test file read (ids, rows,
notes, which benchmark it holds, usage errors) and the output file (its state,
a partial last line, foreign lines refused, compaction to one line per id,
whole lines written)."""

import json
import os
import tempfile
import unittest

from tests.support import REPO
from tests.support.services import read_lines
from transitlm.generate import runner


class InputFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        return path

    def test_scan_and_rows(self):
        path = self.write("t.csv", "indexid,system_prompt,sft_prompt,req_type\n"
                                   "a,S,p1,2\n\nb,S,p2,x\na,S,p3,0\n,S,p4,0\nc,S,p5\n")
        scan = runner.scan_input(path)
        self.assertEqual(scan.ids, ["a", "b", "c"])
        self.assertEqual(scan.rows, 5)
        self.assertEqual(scan.duplicates, ["a"])
        self.assertEqual(scan.empty_ids, 1)
        self.assertTrue(scan.has_system_prompt)
        self.assertEqual([row["req_type"] for row in scan.head], ["2", "x", "0", "0", ""])
        rows = list(runner.iter_input_rows(path, sample_count=2))
        self.assertEqual(rows, [(1, "a", "S", "p1"), (2, "b", "S", "p2")])
        self.assertEqual(runner.scan_input(path, sample_count=2).ids, ["a", "b"])
        state = runner.OutputState()
        state.results.add("b")
        self.assertEqual(list(runner.pending_rows(path, None, state, True, "single_route")),
                         [("a", "S", "p1"), ("c", "S", "p5")])
        self.assertEqual(list(runner.pending_rows(path, None, state, True, "single_route",
                                                  "F")), [("a", "F", "p1"), ("c", "F", "p5")])

    def test_bad_inputs_are_usage_errors(self):
        cases = {"empty.csv": "", "noid.csv": "x,sft_prompt\n1,2\n",
                 "noprompt.csv": "index_id,sft_label\n1,2\n"}
        for name, text in cases.items():
            with self.assertRaises(runner.UsageError, msg=name):
                runner.scan_input(self.write(name, text))
        binary = os.path.join(self.dir, "bin.csv")
        with open(binary, "wb") as handle:
            handle.write(b"index_id,sft_prompt\n\xff\xfe,\xff\n")
        with self.assertRaises(runner.UsageError):
            runner.scan_input(binary)
        with self.assertRaises(runner.UsageError):
            runner.scan_input(os.path.join(self.dir, "absent.csv"))

    def test_input_notes(self):
        scan = runner.InputScan()
        self.assertEqual(runner.input_notes(scan), [])
        scan.has_system_prompt = True
        scan.duplicates = ["a", "b", "a", "c"]
        scan.empty_ids = 1
        self.assertEqual(runner.input_notes(scan), [
            "input repeats 3 ids in 4 more rows (each id asked once), e.g. a, b, c",
            "1 input row without an id skipped (they cannot be joined)"])

    def test_infer_benchmark(self):
        # The file name first, then the evaluators' own rule on the first
        # rows (transitlm.evaluation.benchmark_check), never a rule of its own.
        def scan(label=None, req_types=(), task_id=None):
            result = runner.InputScan()
            result.header = ("index_id", "sft_prompt", "sft_label") + (
                ("req_type",) if req_types else ()) + (("task_id",) if task_id else ())
            text = json.dumps(label, ensure_ascii=False) if label is not None else ""
            result.head = [dict({"sft_label": text, "req_type": str(value)},
                                **({"task_id": task_id} if task_id else {}))
                           for value in (req_types or (0,))]
            return result
        ids = {"station_sequence": ["bus-1", "bus-2"], "line_sequence": ["1路"]}
        infer = runner.infer_benchmark
        self.assertEqual(infer("/r/transit-lm-benchmark2-test.csv", scan())[0], "personalized")
        self.assertEqual(infer("transit-lm-benchmark3-test.csv", scan())[0], "diversity")
        self.assertEqual(infer("x/general_llm_example.csv", scan())[0], "general_llm")
        self.assertEqual(infer("BENCHMARK1.csv", scan(ids, req_types=[2]))[0], "single_route")
        self.assertEqual(infer("t.csv", scan({"first": ids, "second": ids}, [0]))[0],
                         "diversity")
        self.assertEqual(infer("t.csv", scan({"station_sequence": ["秋桥路", "【换乘】", "罗湖"]}))[0],
                         "general_llm")
        self.assertEqual(infer("t.csv", scan(ids))[0], "single_route")
        self.assertEqual(infer("t.csv", scan(ids, [0, 7])), ("personalized",
                         "labels hold one route of stop ids and req_type holds a preference "
                         "in 1 of its first 2 rows"))
        self.assertEqual(infer("t.csv", scan(ids, [0, 0]))[0], "single_route")
        self.assertEqual(infer("t.csv", scan(ids, [7], task_id="benchmark1-test"))[0],
                         "single_route")
        self.assertEqual(infer("t.csv", scan({"line_sequence": []}, [7]))[0], "single_route")
        self.assertEqual(infer("t.csv", scan("not a route"))[0], "single_route")
        self.assertEqual(infer("t.csv", runner.InputScan())[0], "single_route")

    def test_infer_benchmark_on_bundled_data(self):
        for name, expected in (("benchmark2_personalized_example.csv", "personalized"),
                               ("benchmark3_diversity_example.csv", "diversity"),
                               ("general_llm_example.csv", "general_llm")):
            source = os.path.join(REPO, "data", name)
            renamed = os.path.join(self.dir, "t.csv")      # only the data can tell
            with open(source, encoding="utf-8") as src, open(renamed, "w",
                                                             encoding="utf-8") as dst:
                dst.write(src.read())
            self.assertEqual(runner.infer_benchmark(renamed, runner.scan_input(renamed))[0],
                             expected, name)


class OutputFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "p.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, data):
        with open(self.path, "wb") as handle:
            handle.write(data)

    def test_state_of_absent_and_empty_files(self):
        state = runner.read_output_state(self.path)
        self.assertEqual((state.lines, state.ids, state.partial_bytes), (0, 0, 0))
        self.write(b"")
        self.assertFalse(runner.read_output_state(self.path).needs_compaction)

    def test_state_results_errors_and_partial_tail(self):
        self.write(b'{"indexid": "a", "error": "HTTP 500"}\n'
                   b'{"indexid": "b", "generate_results": "x"}\n\n'
                   b'{"indexid": "a", "generate_results": "y"}\n'
                   b'{"indexid": "c", "error": "HTTP 400"}\n'
                   b'{"index_id": "d", "generate_results": ""}\n'
                   b'{"indexid": "e", "genera')
        state = runner.read_output_state(self.path)
        self.assertEqual(state.results, {"a", "b", "d"})
        self.assertEqual(state.errors, {"c"})
        self.assertEqual((state.lines, state.ids), (5, 4))
        self.assertTrue(state.needs_compaction)
        self.assertEqual(state.partial_bytes, len(b'{"indexid": "e", "genera'))
        runner.drop_partial_line(self.path, state)
        with open(self.path, "rb") as handle:
            self.assertTrue(handle.read().endswith(b'"generate_results": ""}\n'))

    def test_foreign_line_refused(self):
        for data in (b"not json\n", b'{"indexid": "a"}\n', b'{"generate_results": "x"}\n',
                     b"[1]\n", b"\xff\n"):
            self.write(data)
            with self.assertRaises(runner.UsageError, msg=data):
                runner.read_output_state(self.path)

    def test_compact_keeps_one_line_per_id(self):
        self.write(b'{"indexid": "a", "error": "1"}\n'
                   b'{"indexid": "b", "error": "1"}\n'
                   b'{"indexid": "a", "generate_results": "first"}\n'
                   b'{"indexid": "b", "error": "2"}\n'
                   b'{"indexid": "c", "generate_results": "c"}\n'
                   b'{"indexid": "a", "generate_results": "second"}\n'
                   b'{"indexid": "a", "error": "3"}\n\n'
                   b'{"indexid": "z", "gen')
        os.chmod(self.path, 0o640)
        self.assertEqual(runner.compact_output(self.path), 4)
        self.assertEqual(read_lines(self.path), [          # in file order
            {"indexid": "a", "generate_results": "first"},
            {"indexid": "b", "error": "2"},
            {"indexid": "c", "generate_results": "c"}])
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o640)
        self.assertEqual([n for n in os.listdir(self.tmp.name)], ["p.jsonl"])
        self.assertEqual(runner.compact_output(self.path), 0)

    def test_writer_whole_lines_and_closed(self):
        writer = runner.LineWriter(self.path)
        self.assertTrue(writer.write({"indexid": "a", "generate_results": "路线\n"}))
        writer.close()
        self.assertFalse(writer.write({"indexid": "b", "generate_results": "x"}))
        writer.close()
        with open(self.path, "rb") as handle:
            data = handle.read()
        self.assertEqual(data.count(b"\n"), 1)            # the text's newline is escaped
        self.assertEqual(read_lines(self.path), [{"indexid": "a", "generate_results": "路线\n"}])

    def test_lines_are_readable_utf8_and_old_escaped_files_resume(self):
        # Issue 39.5: Chinese as itself, not \\uXXXX; what another reader would
        # take for a line end, and half a character, stay escaped.
        self.write(b'{"indexid": "a", "generate_results": "\\u8def\\u7ebf"}\n')  # 1.3's form
        writer = runner.LineWriter(self.path)
        self.assertTrue(writer.write({"indexid": "b", "generate_results": "步行\u2028\ud800"}))
        writer.close()
        with open(self.path, "rb") as handle:
            data = handle.read()
        self.assertIn("步行".encode("utf-8"), data)
        self.assertIn(b"\\u2028\\ud800", data)
        data.decode("utf-8")                               # strict UTF-8 throughout
        self.assertEqual(len(data.decode("utf-8").splitlines()), 2)
        state = runner.read_output_state(self.path)
        self.assertEqual(state.results, {"a", "b"})
        self.assertEqual([line["generate_results"] for line in read_lines(self.path)],
                         ["路线", "步行\u2028\ud800"])


if __name__ == "__main__":
    unittest.main()

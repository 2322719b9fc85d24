"""transitlm.evaluation.reports: the details lines and the list of failed rows.

- A details line (details.jsonl, --details -) escapes DEL, C1 controls,
  bidirectional-text controls and U+2028/U+2029 as \\uXXXX: still the same
  JSON value, one line to every line splitter, and byte-identical to plain
  json.dumps when the record holds none of them -- by every path a line is
  made (one process, a worker's two parts, the parts rendered apart).
- One count of failed rows (issue 29, point 6): every row with a failure code
  has a line in the text report, and report.json's counts.failed, the text
  report's title and the page count the same rows, on the bundled examples
  of the four evaluators.
"""

import json
import os
import re
import shutil
import tempfile
import unittest

import transitlm.pages.evaluator
import transitlm.evaluation.reports
from transitlm.evaluation.catalog import load_benchmark
from transitlm.evaluation.records import row_failed
from tests.support.evaluator_rows import run_evaluator
from tests.support.page_runs import EVALUATORS, page_record

UNSAFE = "\x7f\x85\x9b\u061c\u200e\u200f\u202a\u202e\u2066\u2069\u2028\u2029"


def record(**fields):
    base = {"row": 7, "index_id": "id7", "status": "evaluated", "city": "北京",
            "error": None, "score": 1.5, "failure_codes": []}
    base.update(fields)
    return base


class DetailsLineTest(unittest.TestCase):
    def ways(self, value):
        """A details line of ``value`` made every way the engine makes one."""
        head, tail = transitlm.evaluation.reports.details_parts(value)
        by_keys = transitlm.evaluation.reports._details_parts_by_keys(value)
        return [transitlm.evaluation.reports.details_bytes(value),
                transitlm.evaluation.reports.details_line(head, value["row"], tail),
                transitlm.evaluation.reports.details_line(by_keys[0], value["row"], by_keys[1])]

    def test_unsafe_characters_are_escaped(self):
        value = record(error="a%sb" % UNSAFE, index_id="\u2028id\u0085",
                       reachable_reason="x\u202e(prediction)")
        for line in self.ways(value):
            text = line.decode("utf-8")
            self.assertEqual(len(text.splitlines()), 1)           # Python's splitter
            self.assertEqual(len(re.split("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]",
                                          text.rstrip("\n"))), 1)
            self.assertIsNone(re.search("[%s]" % UNSAFE, text))
            self.assertIn("\\u2028id\\u0085", text)
            self.assertEqual(json.loads(text), value)              # the same value

    def test_each_unsafe_character_alone_is_escaped(self):
        for char in UNSAFE + "\x80\x9f\u202c\u2067":
            for line in self.ways(record(error="a" + char)):
                self.assertNotIn(char.encode("utf-8"), line, repr(char))
                self.assertIn(b"a\\u%04x" % ord(char), line)

    def test_other_lines_are_byte_identical_to_json_dumps(self):
        value = record(error="中文 \t tab \x01 control é \U0001F600 \"quoted\"",
                       city="\u00a0北京")
        plain = (json.dumps(value, ensure_ascii=False, sort_keys=True) + "\n").encode()
        for line in self.ways(value):
            self.assertEqual(line, plain)

    def test_a_lone_surrogate_still_ascii_escaped(self):
        value = record(error="\ud800\u2028\x7f")
        for line in self.ways(value):
            self.assertEqual(json.loads(line.decode("ascii")), value)
            self.assertNotIn(b"\x7f", line)

    def test_line_safe_json(self):
        text = json.dumps({"a": "x\u2029y"}, ensure_ascii=False)
        self.assertEqual(transitlm.evaluation.reports.line_safe_json(text), '{"a": "x\\u2029y"}')
        plain = '{"a": "b"}'
        self.assertIs(transitlm.evaluation.reports.line_safe_json(plain), plain)     # nothing to do


class FailedRowsTest(unittest.TestCase):
    def test_every_failed_row_has_a_line(self):
        records = [
            page_record(1, ["accuracy.access_distance"], transfer_accurate=False),
            page_record(2, ["diversity.identical_routes"], other_failures=[]),
            page_record(3, ["diversity.fewer_than_two_routes"]),
            page_record(4, ["diversity.no_first_route"], in_funnel=False, reachable=False,
                        reachable_reason="prediction has no first route"),
            page_record(5, ["future.code"]),
            page_record(6, []),
        ]
        texts = [transitlm.evaluation.reports.failure_text(r) for r in records]
        self.assertIn("accuracy: access distances off by more than 0.5 km", texts[0])
        self.assertIn("diversity: the routes are identical (RD 0)", texts[1])
        self.assertIn("diversity: fewer than two routes", texts[2])
        self.assertIn("diversity: left out of Part A (prediction has no first route)",
                      texts[3])
        self.assertIn("failure codes: future.code", texts[4])
        self.assertIsNone(texts[5])
        self.assertEqual([text is not None for text in texts], list(map(row_failed, records)))

    def test_one_count_in_the_report_the_text_and_the_page(self):
        folder = tempfile.mkdtemp(prefix="failed_rows_")
        self.addCleanup(shutil.rmtree, folder, True)
        for benchmark in EVALUATORS:
            with self.subTest(benchmark=benchmark):
                out = os.path.join(folder, benchmark)
                status, stdout, err = run_evaluator(load_benchmark(benchmark),
                                                    ["--out", out, "--workers", "1"])
                self.assertEqual(status, 0, err)
                with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
                    counts = json.load(handle)["counts"]
                details = os.path.join(out, "details.jsonl")
                with open(details, encoding="utf-8") as handle:
                    failed = [json.loads(line)["row"] for line in handle
                              if json.loads(line)["failure_codes"]]
                title = re.search(r"Rows with a failed check \((\d+) of (\d+)\)", stdout)
                listed = [int(n) for n in re.findall(r"^  row (\d+) ", stdout, re.M)]
                scan = transitlm.pages.evaluator.scan_details(details, 0)
                self.assertEqual(counts["failed"], len(failed))
                self.assertEqual(int(title.group(1)), len(failed))
                self.assertEqual(listed, failed)
                self.assertEqual(scan.failing, len(failed))
                with open(os.path.join(out, "report.html"), encoding="utf-8") as handle:
                    self.assertIn("%d of %d rows failed" % (len(failed), counts["samples"]),
                                  handle.read())


if __name__ == "__main__":
    unittest.main()

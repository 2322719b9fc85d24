"""Seeded fuzzing of the four evaluators: no input can crash a run.

The bundled examples are damaged at the CSV level (stray and truncated quotes,
NUL bytes, a BOM, CRLF, huge fields, rows with too few or too many cells,
duplicate headers) and at the JSON level (deep nesting, wrong types in every
field, NaN/Infinity/1e999, huge integers, lone surrogates, 100,000-station
routes).  Every run must either finish (exit 0) with every row accounted for --
samples = evaluated + errors + no_response, one details line per row, in
order -- or stop (exit 2) with one line on stderr naming the file.  A
traceback fails the test.  Deterministic: fixed seeds.
"""

import json
import os
import tempfile
import unittest

from tests.support.lane import Offloaded
from tests.support.fuzzing import SingleRoute, evaluate, read_rows, write_rows

# The fuzzed runs (tests/support/fuzzing.py), started as the module loads, in
# a process of their own beside the suite (tests.support.Offloaded).
JSON_LEVEL = Offloaded("tests.support.fuzzing:json_level_runs")
CSV_LEVEL = Offloaded("tests.support.fuzzing:csv_level_runs")


class Fuzz(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, run):
        """A run (tests.support.fuzzing.run) finished with every row accounted
        for, or stopped with one line on stderr naming the file."""
        what, err = run["what"], run["stderr"]
        self.assertIn(run["status"], (0, 2), what)
        if run["status"] == 2:
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, "%s: %s" % (what, err))
            self.assertTrue(lines[0].startswith("error: ") and run["path"] in lines[0],
                            "%s: %s" % (what, err))
            self.assertFalse(run["details_left"], "%s: partial details left" % what)
            return run["status"]
        self.assertEqual(err, "", what)
        self.assertIsNotNone(run["report"], what)
        self.assertIsNotNone(run["rows"], what)
        counts = run["report"]["counts"]
        self.assertEqual(counts["samples"],
                         counts["evaluated"] + counts["errors"] + counts["no_response"], what)
        self.assertEqual(len(run["rows"]), counts["samples"], what)
        self.assertEqual(run["rows"], list(range(1, len(run["rows"]) + 1)), what)
        if run["rows_expected"] is not None:
            self.assertEqual(counts["samples"], run["rows_expected"], what)
        return run["status"]

    # -- JSON level: every row stays a row ------------------------------------------
    def test_json_level_damage_becomes_error_rows(self):
        runs = JSON_LEVEL.result()
        self.assertEqual(len(runs), 4)
        for run in runs:
            with self.subTest(benchmark=run["benchmark"]):
                self.assertEqual(self.check(run), 0)

    # -- CSV level: rows stay accounted for, or the file is refused in one line ------
    def test_csv_level_damage(self):
        runs = CSV_LEVEL.result()
        self.assertEqual(len(runs), 4 * 10)
        for run in runs:
            with self.subTest(benchmark=run["benchmark"], mutation=run["mutation"]):
                self.check(run)

    def test_a_stray_quote_never_loses_a_row_silently(self):
        rows = read_rows("benchmark1_single_route_example.csv")
        path = os.path.join(self.tmp.name, "stray.csv")
        write_rows(path, rows)
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        lines[5] += '"'                    # a stray quote at the end of a row
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines))
        status, _, err, details, _ = evaluate(SingleRoute, path, self.tmp.name)
        if status == 2:
            self.assertIn(path, err)
            return
        with open(details, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle]
        if len(records) < len(rows) - 1:
            merged = [r for r in records if r["failure_codes"] == ["error.malformed_row"]]
            self.assertTrue(merged, "a row vanished without an error row")
            self.assertIn("stray quote", merged[0]["error"])


if __name__ == "__main__":
    unittest.main()

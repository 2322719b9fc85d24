"""Rows that repeat an earlier row's id (transitlm/evaluation/row_ids.py, issue 46): the
count and the first examples, the state a worker process sends and its
merge, ids past those kept as text; and the evaluator's warning with worker
processes equal to one process's."""

import json
import os
import tempfile
import unittest

from tests.support.evaluator_rows import (prompt, route, run_evaluator, write_samples,
                                          write_station_file)
from transitlm.evaluation import row_ids  # noqa: E402
from transitlm.evaluation.catalog import load_benchmark  # noqa: E402
from transitlm.evaluation.inputs import CHUNK_BYTES  # noqa: E402
from transitlm.evaluation.workers import can_fork  # noqa: E402


def tally(ids):
    ids_seen = row_ids.RowIds()
    for index_id in ids:
        ids_seen.add(index_id)
    return ids_seen


def brute_force(ids):
    """(count, [(row, first row, id)] of the first EXAMPLES repeats), directly."""
    first, repeats = {}, []
    for row, index_id in enumerate(ids, start=1):
        if index_id in first:
            repeats.append((row, first[index_id], index_id))
        else:
            first[index_id] = row
    return len(repeats), repeats[:row_ids.EXAMPLES]


class RowIdsTest(unittest.TestCase):
    def test_repeats_match_a_direct_count(self):
        cases = [[], ["a"], ["a", "b"], ["a", "a"], ["a", "b", "a", "b", "a"],
                 ["x%d" % (i % 38) for i in range(76)],
                 ["id%d" % (i * 7919 % 1000) for i in range(3000)],
                 ["", None, "", "null", "\ud800", "\ud800"]]
        for ids in cases:
            with self.subTest(ids=ids[:6]):
                expected = brute_force(["null" if i is None else i for i in ids])
                count, examples = tally(ids).repeats()
                self.assertEqual(count, expected[0])
                self.assertEqual([(row, original) for row, original, _ in examples],
                                 [(row, original) for row, original, _ in expected[1]])
                self.assertEqual(tally(ids).warning() is None, not expected[0])

    def test_merged_states_equal_one_tally(self):
        ids = ["id%d" % (i % 50) for i in range(400)]
        merged = row_ids.RowIds()
        for start in range(0, len(ids), 70):          # chunks, in input order
            merged.merge(tally(ids[start:start + 70]).state())
        self.assertEqual(merged.repeats(), tally(ids).repeats())
        self.assertEqual(merged.ids, ids)

    def test_ids_past_those_kept_are_shown_by_row(self):
        count = row_ids.KEEP_IDS + 3
        ids = ["u%d" % i for i in range(count)] + ["u%d" % (count - 1), "u0"]
        found, examples = tally(ids).repeats()
        self.assertEqual(found, 2)
        self.assertEqual(examples, [(count + 1, count, None), (count + 2, 1, "u0")])
        warning = tally(ids).warning()
        self.assertIn("rows %d and %d, u0 (rows 1 and %d)" % (count, count + 1, count + 2),
                      warning)


@unittest.skipUnless(can_fork(), "worker processes need fork")
class WorkersTest(unittest.TestCase):
    def test_the_warning_with_workers_equals_one_process(self):
        with tempfile.TemporaryDirectory() as folder:
            stations = os.path.join(folder, "stations.csv")
            write_station_file(stations)
            path = os.path.join(folder, "in.csv")
            label = route()
            rows = [{"index_id": "r%d" % (i % 1200), "sft_prompt": prompt(),
                     "sft_label": label, "generate_results": label} for i in range(1500)]
            write_samples(path, rows)
            self.assertGreater(os.path.getsize(path), 2 * CHUNK_BYTES)    # chunks for 2 workers
            reports = []
            for workers in ("1", "2"):
                out = os.path.join(folder, "report-%s.json" % workers)
                status, _, err = run_evaluator(load_benchmark("single_route"), [
                    "--input", path, "--station_info", stations, "--json", out,
                    "--workers", workers, "--quiet"])
                self.assertEqual(status, 0, err)
                with open(out, "rb") as handle:
                    reports.append(handle.read())
            self.assertEqual(reports[0], reports[1])
            warnings = json.loads(reports[0].decode("utf-8"))["warnings"]
            self.assertEqual(len(warnings), 1)
            self.assertTrue(warnings[0].startswith(
                "300 test row(s) repeat an earlier row's id, e.g. r0 (rows 1 and 1201)"))


if __name__ == "__main__":
    unittest.main()

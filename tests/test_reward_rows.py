"""transitlm/reward/rows.py: a row as a trainer holds it (through pandas,
``datasets`` or parquet: ints, floats, None, NaN, decoded JSON, numpy
scalars) scores exactly as its CSV original; a row that cannot be scored
against raises RowDataError naming the field, never a completion's failure.
Plain Python values stand in for the third-party ones."""

import csv
import json
import math
import numbers
import os
import unittest

from tests.support import REPO
from transitlm.reward import rows, scoring  # noqa: E402

EXAMPLES = {"single_route": "benchmark1_single_route_example.csv",
            "personalized": "benchmark2_personalized_example.csv",
            "diversity": "benchmark3_diversity_example.csv",
            "general_llm": "general_llm_example.csv"}
NAN = float("nan")


def csv_rows(benchmark):
    path = os.path.join(REPO, "data", EXAMPLES[benchmark])
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


class FakeInt64(object):
    """What numpy.int64 offers that matters here: no int subclass, tolist()."""

    def __init__(self, value):
        self.value = value

    def tolist(self):
        return self.value

    def __index__(self):
        return self.value


class FakeFloat32(object):
    """numpy.float32: registered as a real number, no float subclass."""

    def __init__(self, value):
        self.value = value

    def __float__(self):
        return self.value


numbers.Real.register(FakeFloat32)


class FakeArray(FakeInt64):
    """A numpy array of a parquet list column: tolist() gives the list."""


def pandas_like(row):
    """The row as pandas.read_csv then a parquet round trip give it: an empty
    cell NaN, digits an int, req_type a float (its column holds NaN-able
    numbers), the JSON columns decoded (as a datasets JSON loader does)."""
    out = {}
    for key, value in row.items():
        if value == "":
            out[key] = NAN
        elif key in ("sft_prompt", "sft_label"):
            out[key] = json.loads(value)
        elif key == "req_type":
            out[key] = float(value)
        elif value.isdigit():
            out[key] = int(value)
        else:
            out[key] = value
    return out


def datasets_like(row):
    """As a datasets/Arrow row: None for an empty cell, req_type an int (or a
    numpy integer), lists inside the label as numpy arrays."""
    out = {}
    for key, value in row.items():
        if value == "":
            out[key] = None
        elif key == "req_type":
            out[key] = FakeInt64(int(value)) if int(value) % 2 else int(value)
        elif key == "sft_label":
            label = json.loads(value)
            if isinstance(label, dict) and isinstance(label.get("station_sequence"), list):
                label = dict(label, station_sequence=FakeArray(label["station_sequence"]))
            out[key] = label
        elif key == "sft_prompt":
            out[key] = json.loads(value)
        else:
            out[key] = value
    return out


class RoundTripTest(unittest.TestCase):
    """Every bundled row, its label and its model answer as completions."""

    def test_every_bundled_row_scores_as_its_csv_original(self):
        checked = 0
        for benchmark in EXAMPLES:
            for row in csv_rows(benchmark):
                for completion in (row["generate_results"], row["sft_label"]):
                    want = scoring.score(completion, row, benchmark=benchmark)
                    for convert in (pandas_like, datasets_like):
                        got = scoring.score(completion, convert(row), benchmark=benchmark)
                        self.assertEqual(got, want, "%s %s %s" % (
                            benchmark, row["index_id"], convert.__name__))
                        checked += 1
        self.assertGreater(checked, 500)

    def test_cells_become_the_csv_cells(self):
        row = csv_rows("personalized")[0]
        normal = rows.trainer_row(dict(pandas_like(row), index_id=7.0, task_id=2,
                                       system_prompt=None))
        self.assertEqual(normal["req_type"], row["req_type"])
        self.assertEqual(normal["index_id"], "7")
        self.assertEqual(normal["task_id"], "2")
        self.assertEqual(normal["system_prompt"], "")
        self.assertEqual(json.loads(normal["sft_label"]), json.loads(row["sft_label"]))
        self.assertIs(rows.trainer_row(row), row)            # a CSV row is left alone
        for value, text in ((2, "2"), (2.0, "2"), (FakeInt64(8), "8"), (None, ""), (NAN, ""),
                            (2.5, "2.5"), (True, "True"), (float("inf"), "inf")):
            self.assertEqual(rows.text_cell(value), text, repr(value))

    def test_a_task_id_from_pandas_names_its_benchmark(self):
        row = dict(csv_rows("single_route")[0], task_id=1.0)
        self.assertEqual(scoring.score(row["sft_label"], row)["score"], 1.0)

    def test_a_mapping_or_a_series_is_a_row(self):
        row = csv_rows("single_route")[0]

        class Series(object):
            def to_dict(self):
                return dict(row)

        want = scoring.score(row["sft_label"], row, benchmark="single_route")
        self.assertEqual(scoring.score(row["sft_label"], Series(), benchmark="single_route"),
                         want)


class BrokenRowTest(unittest.TestCase):
    """What cannot be scored against is the row's fault, named by its field,
    whatever the completion (here the label itself, which would score 1)."""

    def assert_refused(self, row, field, benchmark="single_route"):
        for completion in (csv_rows(benchmark)[0]["sft_label"], "{}", None):
            with self.assertRaises(scoring.RowDataError) as caught:
                scoring.score(completion, row, benchmark=benchmark)
            self.assertIn(field, str(caught.exception))

    def test_too_deep_prompt_or_label(self):
        row = csv_rows("single_route")[0]
        deep_text = "[" * 150 + "]" * 150
        deep = []
        for _ in range(149):
            deep = [deep]
        very_deep = []
        for _ in range(5000):
            very_deep = [very_deep]
        for field in ("sft_label", "sft_prompt"):
            for value in (deep_text, deep, very_deep, {"start": deep}):
                self.assert_refused(dict(row, **{field: value}), field)

    def test_missing_or_not_json(self):
        row = csv_rows("single_route")[0]
        for field in ("sft_label", "sft_prompt"):
            without = dict(row)
            del without[field]
            self.assert_refused(without, field)
            for value in (None, NAN, "", "{not json", b"\xff", {1j: 2}, {"a": object()},
                          12):
                self.assert_refused(dict(row, **{field: value}), field)

    def test_a_req_type_that_is_not_a_whole_number(self):
        row = csv_rows("personalized")[0]
        for value in (2.5, float("inf"), True, "2.0", "two", [2], {"t": 2}, 10 ** 5000):
            self.assert_refused(dict(row, req_type=value), "req_type", "personalized")
        # A missing req_type is what the CSV's empty cell is: read as 0.
        for value in (None, NAN, FakeFloat32(NAN)):
            self.assertEqual(scoring.score(row["sft_label"], dict(row, req_type=value),
                                           benchmark="personalized"),
                             scoring.score(row["sft_label"], dict(row, req_type=""),
                                           benchmark="personalized"))
        # Benchmarks that do not read req_type leave it alone, as for the CSV.
        plain = csv_rows("single_route")[0]
        self.assertEqual(scoring.score(plain["sft_label"], dict(plain, req_type=2.5),
                                       benchmark="single_route")["score"], 1.0)

    def test_a_deep_completion_is_still_the_completion_s(self):
        row = csv_rows("single_route")[0]
        result = scoring.score("[" * 150 + "]" * 150, row, benchmark="single_route")
        self.assertEqual(result["error_code"], "too_deep")
        self.assertTrue(math.isfinite(result["score"]))


if __name__ == "__main__":
    unittest.main()

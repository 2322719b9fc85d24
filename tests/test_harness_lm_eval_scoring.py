"""transitlm/harness/lm_eval_scoring.py: what lm-evaluation-harness calls.
Each answer's record is the evaluator's details line, and each metric's
aggregation gives report.json's figure to the last digit -- on every bundled
and parity row, under both protocols, whatever order the harness's ranks
hand the rows over in -- with a samples log that carries the record once."""

import csv
import json
import os
import pickle
import random
import tempfile
import unittest

from tests.support.services import answers_from
from tests.support.evaluator_rows import evaluate_to_files
from tests.support.parity import check_every_case_set
from tests.support.synthetic_runs import synthetic_records
import transitlm.evaluation.records  # noqa: E402
from transitlm.evaluation.catalog import (BENCHMARK_NAMES, DATA_DIR, benchmark_info,  # noqa: E402
                               benchmark_metrics, load_benchmark)
from transitlm.harness import lm_eval_scoring  # noqa: E402
from transitlm.harness.lm_eval_scoring import (  # noqa: E402
    DRAWINGS, RowTerm, aggregation_name, process_name, task_functions)
from transitlm.evaluation.terms import metric_terms  # noqa: E402


def bundled(benchmark):
    return os.path.join(DATA_DIR, benchmark_info(benchmark).default_input)


def docs_of(path):
    """The rows of a test file as the task folder's docs hold them."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [dict(row=number, index_id=row["index_id"], sft_prompt=row["sft_prompt"],
                 sft_label=row["sft_label"], req_type=row.get("req_type"))
            for number, row in enumerate(rows, 1)]


def run_task(functions, benchmark, docs, answers):
    """What the harness does with a task: process_results per doc, then
    {metric: items} in doc order."""
    items = {}
    for doc, answer in zip(docs, answers):
        for key, value in functions[process_name(benchmark)](doc, [answer]).items():
            items.setdefault(key, []).append(value)
    return items


def figures(functions, benchmark, items):
    return {metric.key: functions[aggregation_name(benchmark, metric.key)](items[metric.key])
            for metric in benchmark_metrics(benchmark)}


class FiguresTest(unittest.TestCase):
    def check_set(self, name, folder, files, protocol):
        station = os.path.join(folder, "station_info.csv")
        line = os.path.join(folder, "line_info.csv")
        functions = task_functions({"protocol": protocol, "station_info": station,
                                    "line_info": line})
        checked = 0
        for benchmark, test_file in sorted(files.items()):
            where = "%s %s %s" % (name, benchmark, protocol)
            docs = docs_of(test_file)
            # The answers as a model writes them: every other one in a fenced block.
            by_prompt = answers_from(test_file)
            answers = [by_prompt[doc["sft_prompt"]] for doc in docs]
            items = run_task(functions, benchmark, docs, answers)
            with tempfile.TemporaryDirectory() as tmp:
                predictions = os.path.join(tmp, "p.jsonl")
                with open(predictions, "w", encoding="utf-8") as handle:
                    for doc, answer in zip(docs, answers):
                        handle.write(json.dumps({"index_id": doc["index_id"],
                                                 "generate_results": answer}) + "\n")
                argv = ["--input", test_file, "--station_info", station, "--predictions",
                        predictions, "--protocol", protocol, "--quiet"]
                if benchmark == "general_llm":
                    argv += ["--line_info", line]
                report, details, _ = evaluate_to_files(load_benchmark(benchmark), argv, tmp)
            self.assertEqual(figures(functions, benchmark, items), report["metrics"], where)
            # Each row's record is its details line, without the drawn routes.
            self.assertEqual(items["conn"], [{key: value for key, value in line.items()
                                              if key not in DRAWINGS} for line in details],
                             where)
            checked += len(docs)
        return checked

    def test_every_figure_is_the_evaluators_to_the_last_digit(self):
        # The bundled rows at least, under both protocols.
        self.assertGreater(check_every_case_set(self, self.check_set), 250)

    def test_rows_from_several_ranks_and_pickled_give_the_same_figures(self):
        # With several processes the harness gathers each rank's rows (pickled)
        # one rank after another: doc order is lost; the records keep their rows.
        functions = task_functions({"protocol": "reference", "station_info": None,
                                    "line_info": None})
        for benchmark in BENCHMARK_NAMES:
            docs = docs_of(bundled(benchmark))
            items = run_task(functions, benchmark, docs, [doc["sft_label"] for doc in docs][::-1])
            expected = figures(functions, benchmark, items)
            ranks = {key: values[0::2] + values[1::2] for key, values in items.items()}
            got = figures(functions, benchmark, pickle.loads(pickle.dumps(ranks)))
            self.assertEqual(got, expected, benchmark)
            shuffled = {key: random.Random(7).sample(values, len(values))
                        for key, values in items.items()}
            self.assertEqual(figures(functions, benchmark, shuffled), expected, benchmark)

    def test_mape_is_the_mean_of_three_means_not_a_sum_of_terms(self):
        # Rows whose (numerator, denominator) sums give another last digit than
        # the evaluator's MAPE: the aggregation must fold the records.
        records = synthetic_records(400, 0.9, seed=3)
        for record in records:
            if record.get("exact_match"):
                record["time_mape_pct"] = record["distance_mape_pct"] / 3.0
                record["fare_mape_pct"] = record["distance_mape_pct"] * 1.1
        terms = [metric_terms("single_route", "reference", record)["mape"] for record in records]
        summed = sum(n for n, _ in terms) / sum(d for _, d in terms)
        aggregate = lm_eval_scoring.aggregation("single_route", "reference", "mape")
        expected = transitlm.evaluation.records.aggregate_records("single_route", "reference",
                                                       records)["metrics"]["mape"]
        self.assertNotEqual(summed, expected)           # the data tells the two apart
        self.assertEqual(aggregate(records), expected)


class SamplesLogTest(unittest.TestCase):
    def setUp(self):
        self.functions = task_functions({"protocol": "reference", "station_info": None,
                                         "line_info": None})
        self.docs = docs_of(bundled("diversity"))

    def test_the_record_is_written_once_and_the_terms_as_pairs(self):
        doc = self.docs[2]
        values = self.functions[process_name("diversity")](doc, [doc["sft_label"]])
        self.assertEqual(list(values), [metric.key for metric in benchmark_metrics("diversity")])
        record = values["conn"]
        self.assertEqual(record["row"], 3)
        self.assertEqual(record["index_id"], doc["index_id"])
        self.assertEqual(record["failure_codes"], [])
        self.assertFalse(set(DRAWINGS) & set(record))
        terms = metric_terms("diversity", "reference", record)
        for key, value in values.items():
            if key != "conn":
                self.assertIsInstance(value, RowTerm)
                self.assertIs(value.record, record)
                self.assertEqual(list(value), list(terms[key]))
        # As --log_samples writes it: the pairs as lists, the record once.
        line = json.loads(json.dumps(values, ensure_ascii=False))
        self.assertEqual(line["rd"], list(terms["rd"]))
        self.assertEqual(line["conn"], record)
        self.assertLess(len(json.dumps(values)), 2 * len(json.dumps(record)))

    def test_a_failing_answer_carries_its_failure_codes(self):
        doc = self.docs[0]
        values = self.functions[process_name("diversity")](doc, ["not a route at all"])
        self.assertEqual(values["conn"]["status"], "error")
        self.assertEqual(values["conn"]["failure_codes"], ["error.invalid_json"])
        self.assertEqual(list(values["sg"]), [0, 0])

    def test_no_answer_stops_the_run(self):
        process = self.functions[process_name("single_route")]
        doc = docs_of(bundled("single_route"))[0]
        answers = [[], [None], [""], [12], [{"a": 1}], ["<think>" + "x" * 100000],
                   ["\x00\ud800" * 50], ["[" * 100000]]
        items = {}
        for results in answers:
            for key, value in process(doc, results).items():
                items.setdefault(key, []).append(value)
        statuses = [record["status"] for record in items["conn"]]
        self.assertEqual(statuses[:3], ["no_response"] * 3)
        self.assertNotIn("evaluated", statuses)
        self.assertEqual(figures(self.functions, "single_route", items)["conn"], 0.0)
        self.assertIsNone(figures(self.functions, "single_route", items)["mape"])


if __name__ == "__main__":
    unittest.main()

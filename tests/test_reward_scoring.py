"""transitlm/reward/scoring.py: the reward's terms are the evaluator's
verdicts.  For every row of the bundled examples and of every parity case
set, under both protocols, the terms score() gives a text equal what
details.jsonl says for that row when the same text is scored with
``evaluate.py --predictions`` -- read from the verdict fields themselves
(reachable, grounding, plausibility, IoUs, exact match, accuracy, compliance,
RD), not from the shared per-row terms."""

import csv
import json
import math
import os
import tempfile
import unittest

from tests.support import REPO
from tests.support.evaluator_rows import evaluate_to_files
from tests.support.parity import check_every_case_set
import transitlm.evaluation.records  # noqa: E402
import transitlm.reward  # noqa: E402
from transitlm.reward import scoring  # noqa: E402

PERSONALIZED_EXAMPLE = os.path.join(REPO, "data", "benchmark2_personalized_example.csv")


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def expected_terms(benchmark, protocol, record):
    """The reward's terms as the verdicts of a details line say them."""
    entered = bool(record.get("in_funnel"))
    reached = entered and record.get("status") == "evaluated" and bool(record.get("reachable"))
    exact = reached and bool(record.get("exact_match"))
    terms = {"conn": float(reached),
             "sg": float(reached and record["station_grounding"]),
             "dp": float(reached and record["distance_plausibility"]),
             "lo": float(record["line_iou"]) if reached else 0.0,
             "sso": float(record["station_iou"]) if reached else 0.0,
             "rem": float(exact),
             "ea": (sum(bool(record[key]) for key in ("distance_accurate", "time_accurate",
                                                       "fare_accurate")) / 3.0) if exact else 0.0,
             "pc": 0.0, "rd": 0.0}
    evaluated = record.get("status") == "evaluated"
    if benchmark == "personalized":
        if protocol == "paper":
            in_scope = record.get("req_type") in (2, 5, 7, 8)
        else:
            in_scope = evaluated
        terms["pc"] = float(bool(in_scope and record.get("compliant")))
    if benchmark == "diversity" and evaluated:
        if protocol == "paper" or (record.get("route_count") or 0) >= 2:
            terms["rd"] = float(record.get("rd") or 0.0)
    return terms


class VerdictsTest(unittest.TestCase):
    """The equality with the evaluator, on every bundled and parity row."""

    def check_set(self, name, folder, files, protocol):
        station = os.path.join(folder, "station_info.csv")
        line = os.path.join(folder, "line_info.csv")
        checked = 0
        for benchmark, test_file in sorted(files.items()):
            rows = read_rows(test_file)
            with tempfile.TemporaryDirectory() as tmp:
                predictions = os.path.join(tmp, "p.jsonl")
                with open(predictions, "w", encoding="utf-8") as handle:
                    for row in rows:
                        handle.write(json.dumps({"index_id": row["index_id"],
                                                 "generate_results": row["generate_results"]},
                                                ensure_ascii=False) + "\n")
                argv = ["--input", test_file, "--station_info", station, "--predictions",
                        predictions, "--protocol", protocol, "--workers", "1", "--quiet"]
                if benchmark == "general_llm":
                    argv += ["--line_info", line]
                _, records, _ = evaluate_to_files(
                    transitlm.evaluation.records.load_benchmark(benchmark), argv, tmp)
            self.assertEqual(len(records), len(rows))
            for row, record in zip(rows, records):
                got = transitlm.reward.score(row["generate_results"], row, benchmark=benchmark,
                                             protocol=protocol, station_info=station,
                                             line_info=line if benchmark == "general_llm"
                                             else None)
                where = "%s %s %s row %s" % (name, benchmark, protocol, record["row"])
                self.assertEqual(tuple(got), scoring.KEYS, where)
                expected = expected_terms(benchmark, protocol, record)
                for key, value in expected.items():
                    self.assertTrue(math.isclose(got[key], value, abs_tol=1e-12),
                                    "%s: %s %r != %r" % (where, key, got[key], value))
                readable = record["status"] == "evaluated"
                self.assertEqual(got["format"], float(readable), where)
                self.assertEqual(got["acc"], got["rem"], where)
                codes = record["failure_codes"]
                self.assertEqual(got["error_code"], "" if readable else codes[0].split(".")[-1],
                                 where)
                self.assertEqual(bool(got["pred"]), readable, where)
                checked += 1
        return checked

    def test_every_row_equals_its_details_line(self):
        # The bundled rows at least, under both protocols.
        self.assertGreater(check_every_case_set(self, self.check_set), 250)


class ScorerForTest(unittest.TestCase):
    """scorer_for finds a scorer by its arguments and the environment that
    names the network files: a variable set or changed between calls is
    followed (the scorers are kept, not the variables' values)."""

    def test_the_environment_is_followed(self):
        from tests.support.services import write_fixture_files
        bundled = scoring.scorer_for("single_route")
        with tempfile.TemporaryDirectory() as folder:
            station, _ = write_fixture_files(folder)
            names = (scoring.STATION_ENV, "TRANSITLM_DATA")
            saved = {name: os.environ.pop(name, None) for name in names}
            try:
                for name, value in ((scoring.STATION_ENV, station), ("TRANSITLM_DATA", folder)):
                    os.environ[name] = value
                    other = scoring.scorer_for("single_route")
                    self.assertIsNot(other, bundled)
                    self.assertIs(scoring.scorer_for("single_route", station_info=station), other)
                    del os.environ[name]
                    self.assertIs(scoring.scorer_for("single_route"), bundled)
            finally:
                for name, value in saved.items():
                    if value is not None:
                        os.environ[name] = value



class ShapingTest(unittest.TestCase):
    def test_a_route_of_fewer_than_two_stations_earns_only_its_format(self):
        # The published rules call it reachable, grounded and plausible (and on
        # benchmark 2 compliant): the terms say so, the score does not pay.
        rows = read_rows(PERSONALIZED_EXAMPLE)
        row = rows[0]
        real = transitlm.reward.score(row["sft_label"], row, benchmark="personalized")
        for protocol in ("reference", "paper"):
            for text in ("{}", '{"line_sequence": []}', '{"station_sequence": ["bus-1"]}'):
                for shaping in ("dense", "gated"):
                    got = transitlm.reward.score(text, row, benchmark="personalized",
                                                 protocol=protocol, shaping=shaping)
                    self.assertAlmostEqual(got["score"], 1.0 / 9, msg=(protocol, text, shaping))
                    self.assertEqual(got["format"], 1.0)
                got = transitlm.reward.score(text, row, benchmark="personalized",
                                             protocol="reference")
                self.assertEqual(got["conn"], 1.0)                         # the verdict
        self.assertEqual(real["score"], 1.0)
        unreachable = transitlm.reward.score('{"station_sequence": ["x", "y"]}', row,
                                             benchmark="personalized")
        self.assertGreater(unreachable["score"], 0.0)


class CompletionCodesTest(unittest.TestCase):
    """The error_code of what a completion holds (docs/reward.md, failure
    codes): a value holding no text is invalid_completion, an empty one
    no_response, a reasoning block cut off in any format unclosed_reasoning;
    JSON text is judged by the evaluator as a predictions file would be."""

    def code(self, completion, benchmark="single_route"):
        row = read_rows(os.path.join(REPO, "data", "benchmark1_single_route_example.csv"))[0]
        return transitlm.reward.score(completion, row, benchmark=benchmark)

    def test_a_value_holding_no_text(self):
        for completion in ({"foo": 1}, [{"foo": 1}], {1: 2}, [], [1, 2], 12,
                           {"role": "assistant", "content": 5}):
            got = self.code(completion)
            self.assertEqual((got["error_code"], got["score"], got["format"]),
                             ("invalid_completion", 0.0, 0.0), repr(completion))

    def test_an_empty_completion(self):
        for completion in (None, "", {"role": "assistant", "content": ""},
                           {"role": "assistant", "content": None},
                           [{"role": "assistant", "content": []}]):
            self.assertEqual(self.code(completion)["error_code"], "no_response", repr(completion))

    def test_json_text_without_a_route_is_the_evaluators_verdict(self):
        # The published evaluator judges {"foo": 1} as a route of no station
        # (evaluated): the reward keeps that verdict and pays only the format.
        got = self.code('{"foo": 1}')
        self.assertEqual((got["error_code"], got["format"], got["rem"]), ("", 1.0, 0.0))

    def test_reasoning_cut_off_in_every_format(self):
        label = read_rows(os.path.join(REPO, "data",
                                       "benchmark1_single_route_example.csv"))[0]["sft_label"]
        for opening in ("<think>", "<thinking>", "<reasoning>",
                        "<|channel|>analysis<|message|>"):
            got = self.code("%sthe answer: %s" % (opening, label))
            self.assertEqual((got["error_code"], got["score"]), ("unclosed_reasoning", 0.0),
                             opening)
        closed = self.code("<|channel|>analysis<|message|>hmm<|end|><|start|>assistant"
                           "<|channel|>final<|message|>%s<|return|>" % label)
        self.assertEqual((closed["error_code"], closed["rem"]), ("", 1.0))

if __name__ == "__main__":
    unittest.main()

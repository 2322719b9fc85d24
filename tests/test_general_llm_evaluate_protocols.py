"""General-LLM rows of the paper-protocol table, end to end: the same input
gives the reference verdict and the paper verdict."""

import csv
import json
import os
import tempfile
import unittest

from tests.support.evaluator_rows import (east, evaluate_to_files, prompt, write_samples,
                                          write_station_file)
from general_llm.evaluate import GeneralLLM

LINE = "地铁1号线(甲站--丁站)"
NAMES = [("甲站", "A"), ("乙站", "B"), ("丙站", "C"), ("丁站", "D")]


def general_route(names, **fields):
    route = {"line_sequence": ["地铁1号线"], "station_name": names,
             "total_distance": "3公里", "total_time": "20分钟", "total_fare": "3",
             "start_transfer_mode": "步行", "end_transfer_mode": "步行",
             "start_transfer_distance": "", "end_transfer_distance": ""}
    route.update(fields)
    return route


class GeneralProtocols(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.stations = os.path.join(self.tmp.name, "st.csv")
        write_station_file(self.stations)
        self.lines = os.path.join(self.tmp.name, "lines.csv")
        with open(self.lines, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["citycode", "line_name", "station_list"])
            writer.writerow(["010", LINE, json.dumps(
                [{"station_name": n, "stop_id": s} for n, s in NAMES], ensure_ascii=False)])

    def tearDown(self):
        self.tmp.cleanup()

    def details(self, rows, protocol):
        path = os.path.join(self.tmp.name, "in.csv")
        write_samples(path, rows)
        report, details, _ = evaluate_to_files(GeneralLLM(), [
            "--input", path, "--station_info", self.stations, "--line_info", self.lines,
            "--protocol", protocol], self.tmp.name)
        return details, report

    def row(self, i, pred):
        label = general_route(None, station_sequence=["甲站", "乙站", "丙站", "丁站"])
        del label["station_name"]
        # origin at A (0 km), destination at D (3 km east)
        return {"index_id": "g%d" % i, "sft_prompt": prompt((0.0, 0.0), (east(3), 0.0)),
                "sft_label": label, "generate_results": pred}

    def test_single_leg_full_list(self):
        rows = [self.row(1, general_route(["甲站", "乙站", "丙站", "丁站"]))]
        ref, _ = self.details(rows, "reference")
        paper, _ = self.details(rows, "paper")
        self.assertFalse(ref[0]["reachable"])                    # 4 names for 1 line
        self.assertIn("count mismatch", ref[0]["reachable_reason"])
        self.assertTrue(paper[0]["reachable"])                   # trimmed to 甲站, 丁站
        self.assertEqual(paper[0]["boarding_alighting_names"], ["甲站", "丁站"])
        # the label is trimmed too under paper: station IoU 1
        self.assertEqual(paper[0]["station_iou"], 1.0)

    def test_distance_plausibility(self):
        # d = 0 km at both ends: a 2 km access distance exceeds 3d (+0.5 in reference)
        rows = [self.row(1, general_route(["甲站", "丁站"], start_transfer_distance="2"))]
        ref, _ = self.details(rows, "reference")
        paper, _ = self.details(rows, "paper")
        self.assertTrue(ref[0]["distance_plausibility"])          # the service has no DP
        self.assertFalse(paper[0]["distance_plausibility"])
        self.assertIn("origin access distance 2.00 km exceeds", paper[0]["distance_plausibility_reason"])

    def test_no_response_rows_count_under_paper_only(self):
        rows = [self.row(1, general_route(["甲站", "丁站"])), self.row(2, "")]
        _, ref = self.details(rows, "reference")
        _, paper = self.details(rows, "paper")
        self.assertEqual(ref["counts"]["no_response"], 1)
        self.assertEqual(ref["rounds"]["reachability"], {"input": 1, "passed": 1})
        self.assertEqual(paper["rounds"]["reachability"], {"input": 2, "passed": 1})
        self.assertEqual(paper["metrics"]["conn"], 0.5)

    def test_line_overlap_on_stripped_names(self):
        rows = [self.row(1, general_route(["甲站", "丁站"]))]
        ref, _ = self.details(rows, "reference")
        self.assertEqual(ref[0]["line_iou"], 1.0)   # "地铁1号线" vs "地铁1号线(甲站--丁站)"
        # quirk: the label's full one-line list is not trimmed, so {甲站, 丁站} vs
        # {甲站, 乙站, 丙站, 丁站} -> 0.5; the paper trims both sides
        self.assertEqual(ref[0]["station_iou"], 0.5)
        self.assertFalse(ref[0]["exact_match"])

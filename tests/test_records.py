"""transitlm.evaluation.records: the funnel's denominators and the metrics they give
(null where a denominator is empty), and transitlm.evaluation.reports' summary line."""

import unittest

import transitlm.evaluation.records
import transitlm.evaluation.reports


class FunnelAndMetrics(unittest.TestCase):
    def record(self, **fields):
        base = {"status": "evaluated", "in_funnel": True, "reachable": True,
                "station_grounding": True, "distance_plausibility": True,
                "line_iou": 1.0, "station_iou": 1.0, "station_iou_exact": True,
                "exact_match": True, "score": 10.0, "label_score": 10.0,
                "score_deviation_pct": 0.0, "score_band": "same",
                "distance_accurate": True, "time_accurate": True, "fare_accurate": True,
                "transfer_accurate": True, "overall_accurate": True,
                "distance_mape_pct": 0.0, "time_mape_pct": 0.0, "fare_mape_pct": 0.0}
        base.update(fields)
        return base

    def test_denominators(self):
        records = [
            self.record(),
            self.record(station_grounding=False, exact_match=False, line_iou=0.5,
                        station_iou=0.5, station_iou_exact=False, score_band="worse",
                        score_deviation_pct=20.0, score=12.0),
            self.record(reachable=False),
            {"status": "error", "in_funnel": True, "reachable": False},
            {"status": "error", "in_funnel": False, "reachable": False},
            self.record(time_accurate=False, overall_accurate=False, time_mape_pct=30.0),
        ]
        rounds = transitlm.evaluation.records.funnel_rounds(records)
        self.assertEqual(rounds["reachability"], {"input": 5, "passed": 3})
        self.assertEqual(rounds["grounding"]["input"], 3)
        self.assertEqual(rounds["grounding"]["station_grounding"], 2)
        overlap = rounds["overlap"]
        self.assertAlmostEqual(overlap["line_iou_mean"], 2.5 / 3)
        self.assertEqual((overlap["exact_match"], overlap["score_worse"], overlap["score_same"]),
                         (2, 1, 2))
        self.assertAlmostEqual(overlap["expert_score_mean"], 32 / 3)
        acc = rounds["accuracy"]
        self.assertEqual((acc["input"], acc["time"], acc["overall"]), (2, 1, 1))
        self.assertAlmostEqual(acc["time_mape_pct"], 15.0)
        metrics = transitlm.evaluation.records.metrics_block(rounds)
        self.assertAlmostEqual(metrics["conn"], 3 / 5)
        self.assertAlmostEqual(metrics["sg"], 2 / 3)
        self.assertAlmostEqual(metrics["rem"], 2 / 3)
        self.assertAlmostEqual(metrics["ea"], 5 / 6)          # (2 + 1 + 2) / (3 * 2)
        self.assertAlmostEqual(metrics["mape"], 5.0)          # (0 + 15 + 0) / 3

    def test_empty_denominators_give_null(self):
        rounds = transitlm.evaluation.records.funnel_rounds([{"status": "error", "in_funnel": True,
                                        "reachable": False}])
        metrics = transitlm.evaluation.records.metrics_block(rounds)
        self.assertEqual(metrics["conn"], 0.0)
        for key in ("sg", "dp", "lo", "sso", "rem", "ea", "mape"):
            self.assertIsNone(metrics[key], key)
        self.assertIsNone(transitlm.evaluation.records.metrics_block(transitlm.evaluation.records.funnel_rounds([]))["conn"])
        with_pc = dict(rounds, preference={"input": 0, "compliant": 0})
        self.assertIsNone(transitlm.evaluation.records.metrics_block(with_pc)["pc"])

    def test_summary_line_layout(self):
        line = transitlm.evaluation.reports.summary_line({"conn": 0.97, "sg": 0.985, "dp": 0.91, "lo": 0.828,
                                    "sso": 0.838, "rem": 0.71, "ea": 0.985, "mape": 1.33})
        self.assertEqual(line, "Conn 97.0% | SG 98.5% | DP 91.0% | LO 0.828 | SSO 0.838 | "
                               "REM 71.0% | EA 98.5% | MAPE 1.33%")
        self.assertIn("EA - | MAPE -", transitlm.evaluation.reports.summary_line({"ea": None, "mape": None}))

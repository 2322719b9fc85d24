"""transitlm.compare.page: the comparison page parses, makes no network
reference, escapes run names, shows each interval as text and as a whisker,
the p-values as the other formats do, and says so when there is nothing to
compare."""

import unittest

import transitlm.compare.page
from tests.support.html_pages import external_references, parse_page


# ---------------------------------------------------------------------------
# Comparison page
# ---------------------------------------------------------------------------

COMPARISON = {
    "schema_version": 1, "confidence": 0.95, "bootstrap": 1000, "seed": 12345,
    "baseline": "base", "rows": {"paired": 38, "missing": 0},
    "runs": [{"name": "base", "path": "/runs/a", "benchmark": "single_route",
              "protocol": "reference", "signature": "sig-a", "rows": 38,
              "metrics": {"conn": {"value": 0.842, "ci": [0.71, 0.95]},
                          "mape": {"value": 7.23, "ci": None}}},
             {"name": "<new>", "path": "/runs/b", "benchmark": "single_route",
              "protocol": "reference", "signature": "sig-b", "rows": 38,
              "metrics": {"conn": {"value": 0.9, "ci": [0.8, 0.97]},
                          "mape": {"value": None, "ci": None}}}],
    "comparisons": [{"run": "<new>", "metric": "conn", "delta": 0.058, "ci": [-0.02, 0.13],
                     "p_value": 0.21, "significant": False}],
    "breakdowns": {"city": {"北京": {"base": 0.8, "<new>": 0.9}}},
}


class ComparisonPageTest(unittest.TestCase):
    def test_page(self):
        text = transitlm.compare.page.comparison_page(COMPARISON)
        parser = parse_page(text)
        self.assertEqual(external_references(parser), [])
        self.assertNotIn("<new>", text)
        self.assertIn("84.2% [71.0%, 95.0%]", text)
        self.assertIn("+5.8 pp", text)
        self.assertIn("[-2.0 pp, +13.0 pp]", text)
        self.assertIn("p=0.210", text)             # p-values as in the other formats
        self.assertEqual(text.count('class="whisker"'), 2)    # two intervals for conn
        self.assertEqual(text.count('<figure class="mchart">'), 2)
        self.assertIn("北京", text)

    def test_empty_result(self):
        text = transitlm.compare.page.comparison_page({})
        parse_page(text)
        self.assertIn("No comparisons.", text)


if __name__ == "__main__":
    unittest.main()

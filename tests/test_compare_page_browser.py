"""The comparison page (compare.py --html) in headless Chromium, in frames 900
and 1,280 pixels wide (one Chromium run): no raw JSON in the rendered text,
nothing wider than the window but what scrolls in a table's own box, visible
interval whiskers, and the page's script runs without a JavaScript error.
Skips where Chromium is not installed (Debian: apt-get install chromium),
except under CI."""

import atexit
import shutil
import tempfile
import unittest

from tests.support.chromium import CHROMIUM, require_installed
from tests.support.lane import Offloaded
from tests.support.comparison_renderings import WIDTHS

# Made and rendered as the module loads, in a process of its own beside the
# suite (tests/support/comparison_renderings.py; tests.support.Offloaded).
FOLDER = tempfile.mkdtemp(prefix="compare_browser_") if CHROMIUM else None
if FOLDER:
    atexit.register(shutil.rmtree, FOLDER, True)     # whether or not the class ran
RENDERED = (Offloaded("tests.support.comparison_renderings:render_comparisons", FOLDER)
            if CHROMIUM else None)


class ComparisonPageBrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Skipped on a developer's machine without Chromium; failed in CI.
        require_installed(CHROMIUM, "the browser checks", "chromium")
        cls.tmp = FOLDER
        cls.found = RENDERED.result()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def check(self, name):
        for width in WIDTHS:
            with self.subTest(width=width):
                attributes = self.found.get("%s@%d" % (name, width)) or {}
                self.assertEqual(attributes.get("data-ready"), "1", attributes)
                self.assertNotIn("data-js-error", attributes)
                self.assertEqual(attributes.get("data-json"), "no", attributes)
                self.assertEqual(attributes.get("data-over"), "0", attributes)
                scroll, window = attributes["data-scroll"].split("/")
                self.assertLessEqual(int(scroll), int(window), attributes)
                stroke = attributes.get("data-whisker", "none")
                self.assertFalse(stroke.startswith("none"), attributes)

    def test_page_of_several_benchmarks(self):
        self.check("several")

    def test_page_of_one_benchmark(self):
        self.check("one")


if __name__ == "__main__":
    unittest.main()

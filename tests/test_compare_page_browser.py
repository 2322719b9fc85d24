"""The comparison page (compare.py --html) in headless Chromium, in frames 900
and 1,280 pixels wide (one Chromium run): no raw JSON in the rendered text,
nothing wider than the window but what scrolls in a table's own box, visible
interval whiskers, and the page's script runs without a JavaScript error.
Skips where Chromium is not installed (Debian: apt-get install chromium),
except under CI."""

import os
import shutil
import tempfile
import unittest

from tests.support import (
    CHROMIUM, benchmark_records, require_installed, run_compare, run_frames, with_script,
    write_run)

WIDTHS = (900, 1280)

# Appended to a copy of the page, after its own script (allowed by hash):
# measures the laid-out page and writes what it found into attributes of
# <body>.  An element inside a table's scrolling box may reach past the
# window; the box itself may not.
PROBE = """
(function(){
var width=document.documentElement.clientWidth,over=[],all=document.querySelectorAll('body *');
for(var i=0;i<all.length;i++){var r=all[i].getBoundingClientRect(),
 box=all[i].parentElement&&all[i].parentElement.closest('.tbox');
 if(r.width&&r.right>width+0.5&&!box)over.push(all[i].tagName+'.'+all[i].getAttribute('class'));}
var b=document.body;
b.setAttribute('data-over',String(over.length));
b.setAttribute('data-over-what',over.slice(0,5).join(' '));
b.setAttribute('data-scroll',document.documentElement.scrollWidth+'/'+width);
var text=b.innerText;
var json=text.match(/[{\\[]\\s*"|"\\s*:\\s*[\\[{"0-9]|\\{\\}|\\[\\]/);
b.setAttribute('data-json',json?json[0]+' near '+text.substr(Math.max(0,json.index-40),80):'no');
var w=document.querySelector('path.whisker');
b.setAttribute('data-whisker',w?getComputedStyle(w).stroke+' '+getComputedStyle(w).strokeWidth:'none');
})();
"""


class ComparisonPageBrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Skipped on a developer's machine without Chromium; failed in CI.
        require_installed(CHROMIUM, "the browser checks", "chromium")
        cls.tmp = tempfile.mkdtemp(prefix="compare_browser_")
        long_folder = "a-folder-name-that-goes-on-" + "x" * 120
        runs = []
        for benchmark in ("single_route", "personalized", "diversity"):
            for model, quality in (("qwen2.5-7b-instruct-with-a-rather-long-model-name-"
                                    + "y" * 60, 0.4), ("llama", 0.9)):
                records = benchmark_records(benchmark, 60, quality, seed=len(model),
                                            cities=("北京", "Shenzhen", "z" * 90))
                for record in records:
                    if record["failure_codes"]:
                        record["failure_codes"].append("overlap." + "w" * 100)
                runs.append(write_run(
                    os.path.join(cls.tmp, long_folder, "%s-%s" % (model[:5], benchmark)),
                    records, benchmark, model=model))
        frames = []
        for name, argv in (("several", runs), ("one", runs[:2])):
            page = os.path.join(cls.tmp, name + ".html")
            status, _, err = run_compare(list(argv) + ["--html", page, "--bootstrap", "100",
                                                       "--by", "city", "--by", "failure"])
            assert status == 0, err
            with open(page, encoding="utf-8") as handle:
                html = handle.read()
            with open(os.path.join(cls.tmp, name + "-probe.html"), "w",
                      encoding="utf-8") as handle:
                handle.write(with_script(html, PROBE))
            frames += [("%s@%d" % (name, width), name + "-probe.html", width)
                       for width in WIDTHS]
        cls.found = run_frames(cls.tmp, frames, height=1000)

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

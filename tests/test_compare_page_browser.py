"""The comparison page (compare.py --html) in headless Chromium: no raw JSON in
the rendered text, nothing wider than a 1280-pixel window, visible interval
whiskers, and the page's script runs without a JavaScript error.  Skips where
Chromium is not installed (Debian: apt-get install chromium)."""

import os
import re
import shutil
import tempfile
import unittest

from tests.support import (
    CHROMIUM, benchmark_records, require_installed, run_chromium, run_compare, with_script,
    write_run)

WIDTH = 1280

# Appended to a copy of the page, after its own script: measures the laid-out
# page and writes what it found into attributes of <body> (read back from the
# DOM Chromium dumps).
PROBE = """
(function(){
var width=window.innerWidth,over=[],all=document.querySelectorAll('body *');
for(var i=0;i<all.length;i++){var r=all[i].getBoundingClientRect();
 if(r.width&&r.right>width+0.5)over.push(all[i].tagName+'.'+all[i].getAttribute('class'));}
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
        cls.runs = []
        for benchmark in ("single_route", "personalized", "diversity"):
            for model, quality in (("qwen2.5-7b-instruct-with-a-rather-long-model-name-"
                                    + "y" * 60, 0.4), ("llama", 0.9)):
                records = benchmark_records(benchmark, 60, quality, seed=len(model),
                                            cities=("北京", "Shenzhen", "z" * 90))
                for record in records:
                    if record["failure_codes"]:
                        record["failure_codes"].append("overlap." + "w" * 100)
                cls.runs.append(write_run(
                    os.path.join(cls.tmp, long_folder, "%s-%s" % (model[:5], benchmark)),
                    records, benchmark, model=model))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def probe(self, argv, name):
        page = os.path.join(self.tmp, name + ".html")
        status, _, err = run_compare(list(argv) + ["--html", page, "--bootstrap", "100",
                                                   "--by", "city", "--by", "failure"])
        self.assertEqual(status, 0, err)
        with open(page, encoding="utf-8") as handle:
            html = handle.read()
        probed = os.path.join(self.tmp, name + "-probe.html")
        with open(probed, "w", encoding="utf-8") as handle:
            handle.write(with_script(html, PROBE))
        profile = tempfile.mkdtemp(dir=self.tmp)
        dom, log = run_chromium("file://" + probed, profile, "--dump-dom", "--hide-scrollbars",
                                "--window-size=%d,1000" % WIDTH)
        body = re.search(r"<body[^>]*>", dom)
        self.assertIsNotNone(body, log[-500:])
        attributes = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group()))
        return attributes

    def check(self, attributes):
        self.assertEqual(attributes.get("data-ready"), "1", attributes)
        self.assertNotIn("data-js-error", attributes)
        self.assertEqual(attributes.get("data-json"), "no", attributes)
        self.assertEqual(attributes.get("data-over"), "0", attributes)
        scroll, width = attributes["data-scroll"].split("/")
        self.assertLessEqual(int(scroll), int(width), attributes)
        stroke = attributes.get("data-whisker", "none")
        self.assertFalse(stroke.startswith("none"), attributes)

    def test_page_of_several_benchmarks(self):
        self.check(self.probe(self.runs, "several"))

    def test_page_of_one_benchmark(self):
        self.check(self.probe(self.runs[:2], "one"))


if __name__ == "__main__":
    unittest.main()

"""Both pages against hostile text (issue 30): model answers, stop ids, line
names, cities, failure codes, folder and model names holding markup that
would run script if escaping failed, bidirectional-text controls and
right-to-left letters, a 3,000-character token and a 140-character folder
name.

In-process: every element of a page is the page's own (one script, one
style, no handler, image, frame, form or foreign link), its
Content-Security-Policy is strict and names the hashes of that script and
style, no bidi control is left raw, and text from outside is isolated (<bdi>,
FSI...PDI in SVG).  In headless Chromium, in frames 900 and 1,280 px wide:
no script of the payload ran, no element of it exists, no page is wider
than its frame -- with the policy and without it (the escaping alone) --
while a copy with the payload let in raw does run it (so the check can
fail), and the policy stops that same raw payload.

Skips where Chromium is not installed, except under CI (CI=true)."""

import base64
import hashlib
import html.parser
import json
import os
import re
import shutil
import tempfile
import unittest

import common
import transitlm.pages.evaluator
from tests.support.chromium import CHROMIUM, require_installed, run_frames, with_script
from tests.support.hostile_text import (HOSTILE_BIDI, HOSTILE_MARKUP, WIDE_TOKEN,
                                        hostile_runs, hostile_text)
from tests.support.page_runs import (PAGE_STATIONS, page_error_row, page_record, page_report,
                                     page_route, write_details)
from tests.support.synthetic_runs import run_compare

WIDTHS = (900, 1280)
HOSTILE_STOPS = (HOSTILE_MARKUP[1], HOSTILE_BIDI[1], WIDE_TOKEN, HOSTILE_MARKUP[4])
# What marks text from outside in a page (a payload, a wide token, RTL letters).
MARKERS = ("pwned", "W" * 40, "\u05e9", "\u0645", "HYPERLINK", "javascript")
FSI, PDI = "\u2068", "\u2069"
RAW_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066\u2067]")
PAGE_TAGS = frozenset((
    "html", "head", "meta", "title", "style", "body", "script", "header", "nav", "section",
    "div", "p", "b", "br", "code", "bdi", "small", "h1", "h2", "h3", "h4", "ul", "li", "a",
    "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "label", "select",
    "option", "input", "button", "figure", "figcaption", "svg", "g", "text", "rect", "path",
    "line", "polyline", "circle", "span"))
VOID = frozenset(("meta", "br", "input", "img"))


def hostile_network():
    stations = dict(PAGE_STATIONS)
    for index, stop in enumerate(HOSTILE_STOPS):
        hops = list(HOSTILE_STOPS[index + 1:index + 2])
        stations[stop] = (116.300 + 0.006 * index, 39.905 + 0.002 * index, hops)
    return common.StationNetwork.from_dict(stations)


def hostile_records(benchmark):
    """Details lines whose every text field is hostile, by turns."""
    records = []
    for row in range(1, 25):
        text = hostile_text(row)
        record = page_record(
            row, ["overlap." + text, "accuracy." + hostile_text(row + 1)], exact=False,
            city=hostile_text(row + 2), index_id=text, reachable_reason=text,
            station_grounding=False, station_grounding_reason=hostile_text(row + 3),
            prediction_routes={"first": page_route(
                list(HOSTILE_STOPS) + ["missing " + text],
                lines=(hostile_text(row + 4), hostile_text(row + 5)),
                start=hostile_text(row + 6), end=WIDE_TOKEN)},
            label_routes={"first": page_route(list(reversed(HOSTILE_STOPS)))})
        if benchmark == "general_llm":
            names = [hostile_text(row + 7), hostile_text(row + 8)]
            record["prediction_routes"] = {"first": page_route(names, lines=(text,))}
            record["match_details"] = [{
                "line_query": text, "line_name": hostile_text(row + 9),
                "boarding_query": names[0], "boarding_name": hostile_text(row + 10),
                "boarding_stop_id": HOSTILE_STOPS[0], "alighting_query": names[1],
                "alighting_name": hostile_text(row + 11),
                "alighting_stop_id": HOSTILE_STOPS[row % 3 + 1]}]
            if row % 2:
                record["reachable"] = False
                record["names_on_lines"] = [
                    {"query": name, "line_name": hostile_text(row + 12), "name": name,
                     "stop_id": stop} for name, stop in zip(names, HOSTILE_STOPS)]
        records.append(record)
    error = page_error_row(25, HOSTILE_MARKUP[0] + " " + WIDE_TOKEN)
    error.update(generator_error=HOSTILE_BIDI[0], city=HOSTILE_BIDI[2], index_id=WIDE_TOKEN)
    return records + [error]


def hostile_page(folder, benchmark):
    """An evaluator page of hostile details and report -> (path, text)."""
    records = hostile_records(benchmark)
    report = page_report(benchmark, records)
    report["warnings"] = [hostile_text(index) for index in range(6)]
    report["inputs"].update(input=HOSTILE_MARKUP[2], station_info=WIDE_TOKEN,
                            predictions=HOSTILE_BIDI[0])
    report["signature"] += "|" + HOSTILE_MARKUP[4] + HOSTILE_BIDI[0]
    report["input_notes"] = {"json_extracted": 2, HOSTILE_MARKUP[1]: HOSTILE_BIDI[1]}
    details = write_details(folder, records)
    path = os.path.join(folder, benchmark + ".html")
    transitlm.pages.evaluator.write_evaluator_page(path, report, details, hostile_network())
    with open(path, encoding="utf-8") as handle:
        return path, handle.read()


def hostile_comparison_page(folder):
    path = os.path.join(folder, "comparison.html")
    status, _, err = run_compare(hostile_runs(folder) + [
        "--html", path, "--bootstrap", "20", "--by", "city", "--by", "failure"])
    if status != 0:
        raise AssertionError(err)
    with open(path, encoding="utf-8") as handle:
        return path, handle.read()


class Structure(html.parser.HTMLParser):
    """Every element of a page with its attributes, and every text with the
    elements around it."""

    def __init__(self, text):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.elements, self.texts, self.stack = [], [], []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass

    def handle_data(self, data):
        self.texts.append((data, tuple(self.stack)))


def sha256(text):
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


class PageStructureTest(unittest.TestCase):
    """The hostile pages, read as a browser's parser reads them."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="hostile_pages_")
        cls.pages = {name: hostile_page(cls.folder, name)[1]
                     for name in ("single_route", "general_llm")}
        cls.pages["comparison"] = hostile_comparison_page(cls.folder)[1]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, True)

    def test_only_the_pages_own_elements(self):
        for name, text in self.pages.items():
            with self.subTest(page=name):
                structure = Structure(text)
                tags = [tag for tag, _ in structure.elements]
                self.assertEqual(set(tags) - PAGE_TAGS, set())
                self.assertEqual((tags.count("script"), tags.count("style")), (1, 1))
                for tag, attrs in structure.elements:
                    for attr, value in attrs.items():
                        self.assertFalse(attr.startswith("on"), (tag, attr, value))
                        if attr in ("href", "src", "action", "xlink:href", "formaction"):
                            self.assertTrue(value.startswith("#"), (tag, attr, value))
                        self.assertNotEqual(attr, "style", (tag, value))

    def test_a_strict_content_security_policy(self):
        for name, text in self.pages.items():
            with self.subTest(page=name):
                structure = Structure(text)
                metas = [attrs["content"] for tag, attrs in structure.elements
                         if tag == "meta" and attrs.get("http-equiv") ==
                         "Content-Security-Policy"]
                self.assertEqual(len(metas), 1)
                # before any style or script: it governs them
                self.assertLess(text.index("Content-Security-Policy"), text.index("<style>"))
                policy = {}
                for directive in metas[0].split(";"):
                    words = directive.split()
                    policy[words[0]] = words[1:]
                script = re.search(r"<script>(.*?)</script>", text, re.S).group(1)
                style = re.search(r"<style>(.*?)</style>", text, re.S).group(1)
                self.assertEqual(policy, {"default-src": ["'none'"],
                                          "script-src": [sha256(script)],
                                          "style-src": [sha256(style)],
                                          "base-uri": ["'none'"], "form-action": ["'none'"]})

    def test_no_raw_bidi_control_and_outside_text_isolated(self):
        for name, text in self.pages.items():
            with self.subTest(page=name):
                self.assertIsNone(RAW_BIDI.search(text))
                self.assertEqual(text.count(FSI), text.count(PDI))
                self.assertIn("\\u202e(prediction)\\u202c", text)    # shown, not obeyed
                loose = []
                for data, stack in Structure(text).texts:
                    if "bdi" in stack or "option" in stack or stack[-1:] in (("style",),
                                                                            ("script",)):
                        continue
                    rest = re.sub("%s[^%s]*%s" % (FSI, PDI, PDI), "", data)
                    if any(marker in rest for marker in MARKERS):
                        loose.append((stack[-3:], rest[:80]))
                self.assertEqual(loose, [])

    def test_the_checks_can_fail(self):
        # Raw markup, a raw override and text outside <bdi> are caught.
        raw = self.pages["single_route"].replace("<bdi>", "<b>", 3).replace(
            "</body>", HOSTILE_MARKUP[1] + "\u202e</body>")
        structure = Structure(raw)
        self.assertIn("img", [tag for tag, _ in structure.elements])
        self.assertIsNotNone(RAW_BIDI.search(raw))
        self.assertTrue(any("pwned" in data and "bdi" not in stack
                            for data, stack in structure.texts))


# ---------------------------------------------------------------------------
# In Chromium: one run, every page in frames of both widths
# ---------------------------------------------------------------------------

# Runs in each framed page once it has loaded (added by hash to its policy).
PROBE = r"""
window.addEventListener('load',function(){
 [].forEach.call(document.querySelectorAll('details'),function(d){d.open=true;});
 var e=document.documentElement,cw=e.clientWidth,wide=[],handlers=0;
 [].forEach.call(document.querySelectorAll('body *'),function(el){
  var r=el.getBoundingClientRect(),box=el.parentElement&&el.parentElement.closest('.tbox');
  if(r.width&&r.right>cw+0.5&&!box&&wide.length<5)
   wide.push(el.tagName+'.'+(el.getAttribute('class')||'')+' '+Math.round(r.right));
  [].forEach.call(el.attributes,function(a){if(/^on/i.test(a.name))handlers++;});});
 document.body.setAttribute('data-probe',JSON.stringify({
  pwned:document.body.getAttribute('data-pwned'),scrollWidth:e.scrollWidth,width:cw,
  wide:wide,scripts:document.scripts.length,handlers:handlers,
  foreign:document.querySelectorAll('img,iframe,object,embed,form,base').length,
  ready:document.body.getAttribute('data-ready'),
  jsError:document.body.getAttribute('data-js-error')}));});
"""

CSP_RE = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>')


def probed(page, keep_policy=True, raw=""):
    """A copy of a page with PROBE, its policy kept or taken out, and ``raw``
    markup let in unescaped at the start of its body."""
    page = page.replace("<body>", "<body>" + raw, 1)
    if keep_policy:
        return with_script(page, PROBE)
    return CSP_RE.sub("", page).replace("</body>", "<script>%s</script></body>" % PROBE, 1)


class HostilePagesInChromiumTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_installed(CHROMIUM, "the browser checks", "chromium")
        cls.folder = tempfile.mkdtemp(prefix="hostile_browser_")
        pages = {"evaluator": hostile_page(cls.folder, "single_route")[1],
                 "general_llm": hostile_page(cls.folder, "general_llm")[1],
                 "comparison": hostile_comparison_page(cls.folder)[1]}
        raw = "".join(HOSTILE_MARKUP[:3])
        variants = {name: probed(text) for name, text in pages.items()}
        variants["evaluator-no-policy"] = probed(pages["evaluator"], keep_policy=False)
        variants["comparison-no-policy"] = probed(pages["comparison"], keep_policy=False)
        variants["raw-no-policy"] = probed(pages["evaluator"], keep_policy=False, raw=raw)
        variants["raw-with-policy"] = probed(pages["evaluator"], raw=raw)
        frames = []
        for name, text in variants.items():
            with open(os.path.join(cls.folder, name + ".html"), "w", encoding="utf-8") as out:
                out.write(text)
            frames += [("%s@%d" % (name, width), name + ".html", width)
                       for width in (WIDTHS if not name.startswith("raw") else WIDTHS[1:])]
        cls.found = run_frames(cls.folder, frames)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, True)

    def findings(self, name, width):
        body = self.found.get("%s@%d" % (name, width)) or {}
        self.assertIn("data-probe", body, "%s@%d: %r" % (name, width, body))
        return json.loads(body["data-probe"])

    def test_nothing_of_the_payload_runs_or_exists(self):
        for name in ("evaluator", "general_llm", "comparison", "evaluator-no-policy",
                     "comparison-no-policy"):
            for width in WIDTHS:
                with self.subTest(page=name, width=width):
                    item = self.findings(name, width)
                    self.assertIsNone(item["pwned"], item)
                    self.assertEqual((item["foreign"], item["handlers"], item["scripts"]),
                                     (0, 0, 2), item)
                    self.assertEqual((item["ready"], item["jsError"]), ("1", None), item)

    def test_no_page_is_wider_than_its_window(self):
        for name in ("evaluator", "general_llm", "comparison"):
            for width in WIDTHS:
                with self.subTest(page=name, width=width):
                    item = self.findings(name, width)
                    self.assertLessEqual(item["scrollWidth"], item["width"], item)
                    self.assertEqual(item["wide"], [], item)

    def test_raw_markup_runs_and_the_policy_stops_it(self):
        # The detector works: the payload let in raw runs without the policy ...
        loose = self.findings("raw-no-policy", 1280)
        self.assertIsNotNone(loose["pwned"], loose)
        self.assertGreater(loose["foreign"], 0)
        # ... and the page's policy keeps that same raw payload from running.
        held = self.findings("raw-with-policy", 1280)
        self.assertIsNone(held["pwned"], held)
        self.assertGreater(held["foreign"], 0)
        self.assertEqual(held["ready"], "1", held)          # the page's own script ran


if __name__ == "__main__":
    unittest.main()

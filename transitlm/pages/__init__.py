"""HTML pages, one self-contained file per run or comparison (layout and escaping, static CSS/JS, SVG maps, the evaluator page); docs/html-pages.md.
May import transitlm.evaluation, transitlm.io and common."""

from transitlm.pages.evaluator import evaluator_page, write_evaluator_page  # noqa: F401

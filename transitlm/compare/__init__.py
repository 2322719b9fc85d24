"""compare.py: runs compared row by row (intervals, paired significance, breakdowns, the main table) in text, Markdown, LaTeX, CSV, JSON and a page; docs/comparison.md.
May import transitlm.pages, transitlm.evaluation, transitlm.io and common."""

"""compare.py: runs compared row by row -- intervals, paired significance,
breakdowns, the main table -- in text, Markdown, LaTeX, CSV, JSON and a page.

``cli`` (the command line), ``run_folders`` (reading run folders, every field
checked), ``metric_terms`` (each row's terms of every metric), ``bootstrap``
(resampling, intervals, paired p-values), ``group_figures`` (one benchmark
and protocol), ``groups`` (naming and grouping runs, the whole result),
``comparability`` (signatures and input hashes), ``breakdowns`` (--by),
``main_table``, ``formats`` (text, Markdown, CSV, JSON), ``latex`` and
``page`` (the HTML page).  See docs/comparison.md.
"""

"""Shared fixtures of the test suite: whatever more than one test module
uses lives in this package, and nowhere else (a test module never imports
another).  This module holds the paths (REPO, SHARED, PARITY) and puts the
repository on sys.path; the fixtures live in modules named for what they
support:

- evaluator_rows: a toy network on the equator, routes, prompts, station and
  sample files, an evaluator run in-process;
- parity: the published evaluator's figures (../shared/parity) against ours;
- synthetic_runs: compare.py's inputs made by hand (details lines, reports,
  run folders);
- hostile_text: what a model's answer, a feed or a folder name may hold;
- page_runs: the evaluator pages' run folders; html_pages: a parser of pages;
- chromium: headless Chromium (skips where absent, fails under CI);
- lane: slow fixtures computed beside the suite (Background, Offloaded);
- gtfs_feeds: GTFS feeds written by the tests;
- services: the route-eval service and the chat servers; streams, run_folders,
  chunked_runs, fuzzing, interrupts, interval_quality, random_networks,
  reward_search, harness_runs, comparison_renderings: the lane's jobs and
  their helpers.

A test module's name says which module or command it tests: test_<module>.py
for transitlm/<folder>/<module>.py and common.py, with a prefix per tool folder
(test_compare_*, test_generate_*, test_networks_*, test_pages_*,
test_general_llm_*).  tests/route_oracle.py (an independent router) and
tests/real_feeds.py (the real GTFS feeds, imported once per run) are tools of
their own, not fixtures.
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
PARITY = os.path.join(SHARED, "parity")

import common  # noqa: E402

# The tests do not write station caches into the user's cache folder (the
# station cache tests choose their own folder).
os.environ.setdefault("TRANSITLM_CACHE_DIR", "off")

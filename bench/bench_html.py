#!/usr/bin/env python3
"""Size and render time of the HTML report at scale.

Builds (once) 10,000-row sample files on a 20,000-station network with
data/make_demo.py into bench/scale/html/ (not committed), runs each evaluator
with --out, then builds the page with transitlm.pages.evaluator_page (default
--html_rows 500) and prints, per benchmark: the page size, the time to build
it, and two render times in headless Chromium (medians of --repeat runs):

  render   wall time of a screenshot at 1280 x 2000 minus that of an empty
           page (the browser's start-up), i.e. load, layout and paint;
  layout   time from navigation start to the end of the page's body with its
           layout done, measured inside the page (performance.now() after
           forcing layout): steadier on a busy machine.

--against REF builds the pages also with the code of a git revision (its
evaluators and its page builder, from `git archive`) and renders the two in
turn (REF, this, REF, this, ...) so both see the same spells of a machine
whose speed drifts; the change is printed.  Figures go in docs/html-pages.md.

    python3 bench/bench_html.py [--samples N] [--stations N] [--repeat K]
                                [--html_rows N] [--against REF]
"""

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from benchmark import build_scale_data  # noqa: E402  (the same make_demo.py build)

BENCHMARKS = [("single_route", "benchmark1_single_route_example.csv"),
              ("personalized", "benchmark2_personalized_example.csv"),
              ("diversity", "benchmark3_diversity_example.csv"),
              ("general_llm", "general_llm_example.csv")]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1280,2000"]
# Builds a page with the code of the tree given as argv[1] (run in a fresh
# process, so each tree's modules are its own); prints the build seconds.
BUILD = """
import sys, json, time
sys.path.insert(0, sys.argv[1])
import common, transitlm.pages.evaluator
report = json.load(open(sys.argv[2], encoding="utf-8"))
network = common.StationNetwork.load(sys.argv[4])
start = time.perf_counter()
transitlm.pages.evaluator.write_evaluator_page(sys.argv[5], report, sys.argv[3], network,
                                               int(sys.argv[6]))
print(time.perf_counter() - start)
"""
LAYOUT_SCRIPT = ("document.body.offsetHeight;document.body.setAttribute("
                 "'data-layout-ms',String(performance.now()));")


def with_layout_probe(text):
    """A page with LAYOUT_SCRIPT at the end of its body, allowed by its hash in
    the page's Content-Security-Policy (where the page has one)."""
    digest = base64.b64encode(hashlib.sha256(LAYOUT_SCRIPT.encode()).digest()).decode()
    text = text.replace("script-src ", "script-src 'sha256-%s' " % digest, 1)
    return text.replace("</body>", "<script>%s</script></body>" % LAYOUT_SCRIPT, 1)


def chromium_run(chromium, url, work, *flags):
    """Wall seconds of one headless Chromium run (fresh profile) and its stdout."""
    profile = tempfile.mkdtemp(dir=work)
    start = time.perf_counter()
    done = subprocess.run([chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile]
                          + list(flags) + [url], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, check=True, timeout=300)
    seconds = time.perf_counter() - start
    shutil.rmtree(profile, ignore_errors=True)
    return seconds, done.stdout


def render_seconds(chromium, path, work):
    """Wall time of one headless screenshot of a file."""
    return chromium_run(chromium, "file://" + path, work,
                        "--screenshot=" + os.path.join(work, "s.png"))[0]


def layout_ms(chromium, probe_path, work):
    """Milliseconds from navigation start to the laid-out end of the page."""
    _, dom = chromium_run(chromium, "file://" + probe_path, work, "--dump-dom")
    match = re.search(rb'data-layout-ms="([0-9.]+)"', dom)
    return float(match.group(1)) if match else float("nan")


def build_pages(root, data, work, tag, html_rows):
    """Run the evaluators of the tree ``root`` and build their pages ->
    {benchmark: (page path, probe path, build seconds, samples)}."""
    out = {}
    stations = os.path.join(data, "station_info.csv")
    for name, sample_file in BENCHMARKS:
        run = os.path.join(work, "%s_%s" % (tag, name))
        flags = ["--line_info", os.path.join(data, "line_info.csv")] \
            if name == "general_llm" else []
        subprocess.run([sys.executable, os.path.join(root, name, "evaluate.py"), "--quiet",
                        "--input", os.path.join(data, sample_file), "--station_info", stations,
                        "--out", run] + flags, check=True, stdout=subprocess.DEVNULL)
        report = os.path.join(run, "report.json")
        with open(report, encoding="utf-8") as handle:
            samples = json.load(handle)["counts"]["samples"]
        page = os.path.join(work, "%s_%s.html" % (tag, name))
        done = subprocess.run([sys.executable, "-c", BUILD, root, report,
                               os.path.join(run, "details.jsonl"), stations, page,
                               str(html_rows)], check=True, stdout=subprocess.PIPE)
        probe = page[:-5] + "_probe.html"
        with open(page, encoding="utf-8") as handle:
            text = handle.read()
        with open(probe, "w", encoding="utf-8") as handle:
            handle.write(with_layout_probe(text))
        out[name] = (page, probe, float(done.stdout), samples)
    return out


def git_tree(ref, work):
    """The files of a git revision in a temporary folder (git archive)."""
    folder = os.path.join(work, "tree_" + re.sub(r"[^\w.-]", "_", ref))
    os.makedirs(folder)
    archive = subprocess.run(["git", "-C", REPO, "archive", ref], stdout=subprocess.PIPE,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return folder


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--stations", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--html_rows", type=int, default=500)
    parser.add_argument("--against", metavar="REF",
                        help="a git revision to compare with (built and rendered in turn)")
    parser.add_argument("--data", default=os.path.join(HERE, "scale", "html"),
                        help="folder of the scale data (built once)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    build_scale_data(args.data, args.stations, args.samples)
    work = tempfile.mkdtemp(prefix="bench_html_")
    try:
        trees = [("this", REPO)]
        if args.against:
            trees.insert(0, (args.against, git_tree(args.against, work)))
        pages = {tag: build_pages(root, args.data, work, "t%d" % index, args.html_rows)
                 for index, (tag, root) in enumerate(trees)}
        empty = os.path.join(work, "empty.html")
        with open(empty, "w", encoding="utf-8") as handle:
            handle.write("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>"
                         "<body></body></html>")
        times = {}          # (tag, benchmark) -> ([render s], [layout ms])
        baseline = []
        if chromium:
            for _ in range(args.repeat):
                baseline.append(render_seconds(chromium, empty, work))
                for name, _ in BENCHMARKS:
                    for tag, _ in trees:
                        page, probe = pages[tag][name][:2]
                        render, layout = times.setdefault((tag, name), ([], []))
                        render.append(render_seconds(chromium, page, work))
                        layout.append(layout_ms(chromium, probe, work))
            print("empty page: %.2f s to a screenshot (median, subtracted below)"
                  % median(baseline))
        else:
            print("chromium not installed: render times skipped")
        print("%-13s %-8s %7s %10s %10s %11s %11s" % ("benchmark", "code", "rows", "page (MB)",
                                                   "build (s)", "render (s)", "layout (ms)"))
        for name, _ in BENCHMARKS:
            figures = {}
            for tag, _ in trees:
                page, _, build, samples = pages[tag][name]
                render, layout = times.get((tag, name), ([], []))
                figures[tag] = (os.path.getsize(page) / 1e6, build,
                                median(render) - median(baseline) if render else None,
                                median(layout) if layout else None)
                size, build, render_s, layout_m = figures[tag]
                print("%-13s %-8s %7d %10.2f %10.2f %11s %11s"
                      % (name, tag[:8], samples, size, build,
                         "-" if render_s is None else "%.2f" % render_s,
                         "-" if layout_m is None else "%.0f" % layout_m))
            if args.against:
                old, new = figures[args.against], figures["this"]
                print("%-13s %-8s %7s %+9.1f%% %+9.1f%% %11s %+10.1f%%" % (
                    "", "change", "", 100.0 * (new[0] / old[0] - 1), 100.0 * (new[1] / old[1] - 1),
                    "%+.2f s" % (new[2] - old[2]) if new[2] is not None else "-",
                    100.0 * (new[3] / old[3] - 1) if new[3] else float("nan")))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Size and render time of the HTML report at scale.

Builds (once) 10,000-row sample files on a 20,000-station network with
data/make_demo.py into bench/scale/html/ (not committed), runs each evaluator
with --out, then builds the page with transitlm.pages.evaluator_page (default
--html_rows 500) and prints: the page size, the time to build it, and the time
headless Chromium takes to render it to a screenshot minus the time it takes
for an empty page (best of --repeat).  Figures go in the README.

    python3 bench/bench_html.py [--samples N] [--stations N] [--repeat K] [--html_rows N]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import common  # noqa: E402
import transitlm.pages.evaluator  # noqa: E402
from benchmark import build_scale_data  # noqa: E402  (the same make_demo.py build)

BENCHMARKS = [("single_route", "benchmark1_single_route_example.csv"),
              ("personalized", "benchmark2_personalized_example.csv"),
              ("diversity", "benchmark3_diversity_example.csv"),
              ("general_llm", "general_llm_example.csv")]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1280,2000"]


def render_seconds(chromium, path, work):
    """Wall time of one headless screenshot of a file (fresh profile)."""
    profile = tempfile.mkdtemp(dir=work)
    start = time.perf_counter()
    subprocess.run([chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile,
                                                  "--screenshot=" + os.path.join(work, "s.png"),
                                                  "file://" + path],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=300)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--stations", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--html_rows", type=int, default=500)
    parser.add_argument("--data", default=os.path.join(HERE, "scale", "html"),
                        help="folder of the scale data (built once)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    build_scale_data(args.data, args.stations, args.samples)
    network = common.StationNetwork.load(os.path.join(args.data, "station_info.csv"))
    work = tempfile.mkdtemp(prefix="bench_html_")
    try:
        empty = os.path.join(work, "empty.html")
        with open(empty, "w", encoding="utf-8") as handle:
            handle.write("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>"
                         "<body></body></html>")
        baseline = None
        if chromium:
            baseline = min(render_seconds(chromium, empty, work) for _ in range(args.repeat))
            print("empty page: %.2f s to a screenshot (subtracted below)" % baseline)
        else:
            print("chromium not installed: render times skipped")
        print("%-13s %7s %10s %10s %11s" % ("benchmark", "rows", "page (MB)", "build (s)",
                                            "render (s)"))
        for name, sample_file in BENCHMARKS:
            out = os.path.join(work, name)
            flags = ["--line_info", os.path.join(args.data, "line_info.csv")] \
                if name == "general_llm" else []
            subprocess.run([sys.executable, os.path.join(REPO, name, "evaluate.py"), "--quiet",
                            "--input", os.path.join(args.data, sample_file),
                            "--station_info", os.path.join(args.data, "station_info.csv"),
                            "--out", out] + flags, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "report.json"), encoding="utf-8") as handle:
                report = json.load(handle)
            page = os.path.join(work, name + ".html")
            start = time.perf_counter()
            transitlm.pages.evaluator.write_evaluator_page(page, report, os.path.join(out, "details.jsonl"),
                                             network, args.html_rows)
            build = time.perf_counter() - start
            render = "-"
            if chromium:
                best = min(render_seconds(chromium, page, work) for _ in range(args.repeat))
                render = "%.2f" % (best - baseline)
            print("%-13s %7d %10.2f %10.2f %11s" % (name, report["counts"]["samples"],
                                                   os.path.getsize(page) / 1e6, build, render))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

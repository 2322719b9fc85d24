#!/usr/bin/env python3
"""Speed and memory of data/make_dataset.py on New York's subway and on
Cairns' buses (../shared/gtfs/), rows and sessions a second.

    python3 bench/bench_dataset.py [--test 100] [--train 200] [--corpus 300] [--workers 1]
                                   [--origin_group N]

Imports each feed (data/import_gtfs.py), then runs make_dataset.py in a fresh
process three times on it -- test files only (--train 0 --corpus 0), with
the train files, with the corpus -- and prints the wall times, the rates
(test rows: 4 x --test in the first run; train rows: 3 x --train, the
second run's extra time; sessions: --corpus, the third run's extra time,
the static records included) and the largest peak resident memory of a run
(resource.getrusage of the children).  Figures: docs/performance.md.

    python3 bench/bench_dataset.py --before CHECKOUT [--test 10] [--corpus 6000]
        [--workers 2] [--repeat 3] [--origin_group N]

With --before: corpus sessions a second of CHECKOUT's make_dataset.py and
this checkout's, measured in one run, alternately (before, after, before,
after ...; a fresh process each), `repeat` times: each builds --test test
rows and no train rows, with --corpus 0 and with --corpus N; the rate is
marginal, N over the median wall time of the second minus that of the
first (start-up, the test files and the static records do not count).
--origin_group is given to this checkout only (an older one may not have
it).  The two checkouts' corpus parts are compared byte for byte when
--origin_group is not given.
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
IMPORTER = os.path.join(REPO, "data", "import_gtfs.py")
BUILDER = os.path.join(REPO, "data", "make_dataset.py")
FEEDS = (("nyc-subway.zip", "New York", "3651000"), ("cairns.zip", "Cairns", "3530"))


def timed(args):
    """-> (wall seconds, CPU seconds of the run's processes, workers included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    subprocess.run([sys.executable] + args, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.time() - start, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def paired(args, network, city):
    """Sessions a second of CHECKOUT and of this checkout on ``network``."""
    import filecmp
    import statistics
    checkouts = (("before", os.path.abspath(args.before)), ("after", REPO))
    walls = {(name, n): [] for name, _ in checkouts for n in (0, args.corpus)}
    tmp = tempfile.mkdtemp(prefix="transitlm-bench-pair-")
    try:
        for _ in range(args.repeat):
            for n in (0, args.corpus):
                for name, checkout in checkouts:
                    out = os.path.join(tmp, "%s-%d" % (name, n))
                    shutil.rmtree(out, True)
                    argv = [os.path.join(checkout, "data", "make_dataset.py"), "--network", network,
                            "--out", out, "--test", str(args.test), "--train", "0",
                            "--corpus", str(n), "--part_size", "1000000",
                            "--workers", str(args.workers)]
                    if name == "after" and args.origin_group:
                        argv += ["--origin_group", str(args.origin_group)]
                    walls[(name, n)].append(timed(argv)[0])
        same = None
        if not args.origin_group:
            folder = "transit-lm-cpt-corpus"
            a, b = (os.path.join(tmp, "%s-%d" % (name, args.corpus), folder) for name, _ in checkouts)
            names = sorted(os.listdir(a))
            same = names == sorted(os.listdir(b)) and not filecmp.cmpfiles(
                a, b, names, shallow=False)[1]
    finally:
        shutil.rmtree(tmp, True)
    rates = {}
    for name, _ in checkouts:
        small, large = (statistics.median(walls[(name, n)]) for n in (0, args.corpus))
        rates[name] = args.corpus / max(1e-9, large - small)
        print("%-10s %-6s %6.2f s / %6.2f s (--corpus 0 / %d)  %7.0f sessions/s marginal%s"
              % (city, name, small, large, args.corpus, rates[name],
                 "  --origin_group %d" % args.origin_group
                 if name == "after" and args.origin_group else ""))
    print("%-10s after / before %.2fx%s" % (
        city, rates["after"] / rates["before"],
        "" if same is None else ("; corpus parts the same bytes" if same else
                                 "; CORPUS PARTS DIFFER")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--train", type=int, default=200)
    parser.add_argument("--corpus", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--origin_group", type=int, default=None,
                        help="make_dataset.py's --origin_group (default: its own, by density)")
    parser.add_argument("--gtfs", default=os.path.join(REPO, "..", "shared", "gtfs"))
    parser.add_argument("--before", default=None,
                        help="another checkout: corpus sessions a second of both, paired")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="transitlm-bench-dataset-")
    try:
        for feed, city, code in FEEDS:
            network = os.path.join(tmp, feed + ".net")
            subprocess.run([sys.executable, IMPORTER, os.path.join(args.gtfs, feed), "--city", city,
                            "--adcode", code, "--out", network], check=True,
                           stdout=subprocess.DEVNULL)
            if args.before:
                paired(args, network, city)
                continue
            base = [BUILDER, "--network", network, "--test", str(args.test),
                    "--workers", str(args.workers), "--part_size", "1000000"]
            if args.origin_group:
                base += ["--origin_group", str(args.origin_group)]
            runs = []
            for k, extra in enumerate((["--train", "0", "--corpus", "0"],
                                       ["--train", str(args.train), "--corpus", "0"],
                                       ["--train", "0", "--corpus", str(args.corpus)])):
                runs.append(timed(base + extra + ["--out", os.path.join(tmp, "%s.%d" % (feed, k))]))
            for what, k in (("wall", 0), ("cpu", 1)):
                t = [run[k] for run in runs]
                print("%-10s %-4s test %6.1f rows/s (%.1f s)  train %6.1f rows/s (+%.1f s)  "
                      "corpus %6.1f sessions/s (+%.1f s)  workers %d"
                      % (city, what, 4 * args.test / t[0], t[0],
                         3 * args.train / max(1e-9, t[1] - t[0]), t[1] - t[0],
                         args.corpus / max(1e-9, t[2] - t[0]), t[2] - t[0], args.workers))
        if args.before:
            return
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
        print("peak resident memory of a run: %.0f MB" % peak)
    finally:
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    main()

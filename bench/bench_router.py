#!/usr/bin/env python3
"""Speed and memory of the router: benchmark rows (make_benchmark.py) against
another checkout, and corpus sessions (router.OriginSearch) against the search's
own floor.

    python3 bench/bench_router.py rows --network DIR --before CHECKOUT
        [--small 10] [--large 60] [--repeat 3] [--workers 1]
    python3 bench/bench_router.py sessions --network DIR
        [--origins 20] [--per_origin 20] [--candidates 5] [--factor 1.5]

rows: runs CHECKOUT/data/make_benchmark.py and this checkout's, each with
--samples small and large, alternately (before, after, before, after ...) in
one run, `repeat` times, every run a fresh process; the four files' rows per
second are marginal: (4 x (large - small)) / (time of large - time of small),
medians over the repeats, so start-up (reading the network) does not count.
Time is the child's CPU time (user + sys, os.wait4), which sharing the
machine with other work disturbs far less than wall time (also shown).  Peak
memory is the child's largest resident set.  The two checkouts' files are
compared row by row (the rows whose label differs are counted).

sessions: in this process, OriginSearch from `origins` origin points (near a
station, as make_benchmark draws them), each asked candidates_to for
`per_origin` destinations 2.5-13 km away: sessions a second, candidates per
session.  The floor: the same origins' searches run to completion
(OriginSearch.run: one Dijkstra over the state graph per origin) and timed
alone.  A first pass over a few other origins fills the network's ride tables
(kept for the run) before anything is timed.  CPU time of this process.
"""

import argparse
import csv
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

FILES = ("benchmark1_single_route.csv", "benchmark2_personalized.csv",
         "benchmark3_diversity.csv", "general_llm.csv")
TRIP_KM = (2.5, 13.0)


def run_builder(checkout, network, out, samples, extra=()):
    """(cpu s, wall s, peak MB) of one make_benchmark.py run in a fresh process
    (cpu: the process and the workers it waited for; peak: the largest of them)."""
    command = [sys.executable, os.path.join(checkout, "data", "make_benchmark.py"),
               "--network", network, "--out", out, "--samples", str(samples)] + list(extra)
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             cwd=checkout)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    err = child.stderr.read().decode("utf-8", "replace")
    child.stderr.close()
    if status != 0:
        sys.exit("%s failed: %s" % (" ".join(command), err.strip()))
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024.0


def changed_rows(a, b):
    """(rows compared, rows whose label or prompt differ) between two output folders."""
    total = changed = 0
    for name in FILES:
        with open(os.path.join(a, name), newline="", encoding="utf-8") as f:
            rows_a = list(csv.reader(f))[1:]
        with open(os.path.join(b, name), newline="", encoding="utf-8") as f:
            rows_b = list(csv.reader(f))[1:]
        total += max(len(rows_a), len(rows_b))
        changed += sum(1 for x, y in zip(rows_a, rows_b) if x != y) + abs(len(rows_a) - len(rows_b))
    return total, changed


def bench_rows(args):
    checkouts = (("before", os.path.abspath(args.before)), ("after", REPO))
    extra = {"before": [], "after": ["--workers", str(args.workers)]}
    times = {(name, size): [] for name, _ in checkouts for size in (args.small, args.large)}
    peaks = {name: 0.0 for name, _ in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for size in (args.small, args.large):
                for name, checkout in checkouts:
                    out = os.path.join(tmp, "%s-%d" % (name, size))
                    shutil.rmtree(out, ignore_errors=True)     # a fresh --out every run
                    cpu, wall, peak = run_builder(checkout, args.network, out, size, extra[name])
                    times[(name, size)].append((cpu, wall))
                    peaks[name] = max(peaks[name], peak)
        compared, changed = changed_rows(os.path.join(tmp, "before-%d" % args.large),
                                         os.path.join(tmp, "after-%d" % args.large))
    rows = 4 * (args.large - args.small)
    print("network   %s" % args.network)
    print("runs      --samples %d and %d, %d repeats each, before and after (--workers %d) "
          "alternately; medians" % (args.small, args.large, args.repeat, args.workers))
    rates, wall_rates = {}, {}
    for name, _ in checkouts:
        cpu = [statistics.median(t[0] for t in times[(name, size)]) for size in (args.small, args.large)]
        wall = [statistics.median(t[1] for t in times[(name, size)]) for size in (args.small, args.large)]
        rates[name] = rows / max(1e-9, cpu[1] - cpu[0])
        wall_rates[name] = rows / max(1e-9, wall[1] - wall[0])
        print("%-7s   cpu %6.2f s / %6.2f s  wall %6.2f s / %6.2f s  marginal %8.0f rows/s cpu, "
              "%8.0f rows/s wall  peak %5.0f MB" % (
                  name, cpu[0], cpu[1], wall[0], wall[1], rates[name], wall_rates[name],
                  peaks[name]))
    print("speed-up  %.1fx (marginal rows/s, cpu)  %.1fx (wall)" % (
        rates["after"] / rates["before"], wall_rates["after"] / wall_rates["before"]))
    print("labels    %d of %d rows differ (--samples %d)" % (changed, compared, args.large))


def draw_plans(net, districts, rng, origins, per_origin):
    from transitlm.networks import router
    plans = []
    while len(plans) < origins:
        district = districts[rng.randrange(len(districts))]
        a = rng.choice(district.stops)
        near = [b for b in district.stops if TRIP_KM[0] <= net.dist(a, b) <= TRIP_KM[1]]
        if not near:
            continue
        origin = router.access_point(net, rng, district, a, False)
        dests = [router.access_point(net, rng, district, rng.choice(near), False)
                 for _ in range(per_origin)]
        plans.append((district, origin, dests))
    return plans


def bench_sessions(args):
    from transitlm.networks import benchmark_builder as builder
    from transitlm.networks import router
    start = time.process_time()
    net = builder.load_network(args.network)
    load = time.process_time() - start
    districts = builder.usable_districts(net)
    rng = router.sub_rng(args.seed, "bench sessions")
    warm = draw_plans(net, districts, rng, max(2, args.origins // 4), 2)
    plans = draw_plans(net, districts, rng, args.origins, args.per_origin)
    for district, origin, dests in warm:
        router.OriginSearch(net, district, origin, router.Prefs()).run()
    sessions = candidates = popped = 0
    start = time.process_time()
    for district, origin, dests in plans:
        search = router.OriginSearch(net, district, origin, router.Prefs())
        for dest in dests:
            candidates += len(search.candidates_to(dest, args.candidates, args.factor))
            sessions += 1
        popped += search.popped
    spent = time.process_time() - start
    full = 0
    start = time.process_time()
    for district, origin, dests in plans:
        full += router.OriginSearch(net, district, origin, router.Prefs()).run().popped
    floor = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("network   %s  (%d stops, %d line directions; read in %.1f s cpu)"
          % (args.network, len(net.ids), len(net.linedirs), load))
    print("sessions  %d origins x %d destinations, up to %d candidates within %gx the best"
          % (args.origins, args.per_origin, args.candidates, args.factor))
    print("rate      %.0f sessions/s cpu  (%.2f ms a session, %.2f candidates a session, "
          "%.0f states expanded an origin)" % (sessions / spent, 1000 * spent / sessions,
                                               candidates / float(sessions), popped / args.origins))
    print("floor     %.1f ms an origin: one Dijkstra over the state graph, run to completion "
          "(%.0f states), timed alone = %.2f ms a session at %d destinations an origin"
          % (1000 * floor / args.origins, full / args.origins, 1000 * floor / sessions,
             args.per_origin))
    print("peak      %.0f MB (this process)" % peak)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what")
    rows = sub.add_parser("rows")
    rows.add_argument("--network", required=True)
    rows.add_argument("--before", required=True, help="a checkout of the router before (git worktree)")
    rows.add_argument("--small", type=int, default=10)
    rows.add_argument("--large", type=int, default=60)
    rows.add_argument("--repeat", type=int, default=3)
    rows.add_argument("--workers", type=int, default=1, help="this checkout's --workers (default 1)")
    sessions = sub.add_parser("sessions")
    sessions.add_argument("--network", required=True)
    sessions.add_argument("--origins", type=int, default=20)
    sessions.add_argument("--per_origin", type=int, default=20)
    sessions.add_argument("--candidates", type=int, default=5)
    sessions.add_argument("--factor", type=float, default=1.5)
    sessions.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.what == "rows":
        bench_rows(args)
    elif args.what == "sessions":
        bench_sessions(args)
    else:
        parser.error("say rows or sessions")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Speed and memory of data/import_gtfs.py on a synthetic feed with N stop times.

    python3 bench/bench_gtfs.py [--stop_times 1000000] [--repeat 1]

Writes a feed folder in a temporary directory (bus routes on a grid, 40
stops per trip, one weekday service, stop_times.txt in trip order), runs the
importer in a fresh process per repeat and prints the best wall time and the
child's peak resident memory (resource.getrusage).  The issue's bound for
1,000,000 stop times: 30 s and 500 MB.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IMPORTER = os.path.join(os.path.dirname(HERE), "data", "import_gtfs.py")
STOPS_PER_TRIP = 40
ROUTES = 100


def write_feed(folder, stop_times):
    """A feed with about `stop_times` stop times (whole trips of 40 stops)."""
    trips = max(1, stop_times // STOPS_PER_TRIP)
    stops = ROUTES * STOPS_PER_TRIP
    with open(os.path.join(folder, "agency.txt"), "w") as f:
        f.write("agency_id,agency_name,agency_url,agency_timezone\nB,Bench,http://b,Asia/Shanghai\n")
    with open(os.path.join(folder, "calendar.txt"), "w") as f:
        f.write("service_id,monday,tuesday,wednesday,thursday,friday,saturday,sunday,start_date,end_date\n"
                "WK,1,1,1,1,1,0,0,20240101,20241231\n")
    with open(os.path.join(folder, "stops.txt"), "w") as f:
        f.write("stop_id,stop_name,stop_lat,stop_lon\n")
        for s in range(stops):
            f.write("s%d,Stop %d,%.6f,%.6f\n" % (s, s, 31.0 + (s % 97) * 0.003, 121.0 + (s // 97) * 0.003))
    with open(os.path.join(folder, "routes.txt"), "w") as f:
        f.write("route_id,route_short_name,route_type\n")
        for r in range(ROUTES):
            f.write("r%d,%d,3\n" % (r, r + 1))
    with open(os.path.join(folder, "trips.txt"), "w") as f, \
            open(os.path.join(folder, "stop_times.txt"), "w") as g:
        f.write("route_id,service_id,trip_id,direction_id\n")
        g.write("trip_id,arrival_time,departure_time,stop_id,stop_sequence\n")
        for t in range(trips):
            route, direction = t % ROUTES, (t // ROUTES) % 2
            f.write("r%d,WK,t%d,%d\n" % (route, t, direction))
            start = 5 * 3600 + (t // ROUTES) * 60
            order = range(STOPS_PER_TRIP) if direction == 0 else range(STOPS_PER_TRIP - 1, -1, -1)
            for k, position in enumerate(order):
                clock = start + k * 90
                text = "%02d:%02d:%02d" % (clock // 3600, clock // 60 % 60, clock % 60)
                g.write("t%d,%s,%s,s%d,%d\n" % (t, text, text, route * STOPS_PER_TRIP + position, k + 1))
    return trips * STOPS_PER_TRIP


def measure(feed, out):
    """(wall s, peak MB) of one importer run in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run([sys.executable, IMPORTER, feed, "--out", out, "--city", "Bench",
                           "--overwrite"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit("import_gtfs.py failed: %s" % done.stderr.strip())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest child so far (KB on Linux).
    return wall, max(peak, before) / 1024.0, done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stop_times", type=int, default=1000000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        feed = os.path.join(tmp, "feed")
        os.makedirs(feed)
        rows = write_feed(feed, args.stop_times)
        size = os.path.getsize(os.path.join(feed, "stop_times.txt")) / 1e6
        results = [measure(feed, os.path.join(tmp, "out")) for _ in range(max(1, args.repeat))]
        wall = min(r[0] for r in results)
        peak = max(r[1] for r in results)
        print("stop times  %d (stop_times.txt %.0f MB)" % (rows, size))
        print("wall        %.2f s (best of %d)" % (wall, len(results)))
        print("peak        %.0f MB (largest resident set of the importer process)" % peak)
        print("rate        %.0f stop times/s" % (rows / wall))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Speed of generate.py itself: rows/s against a stand-in server that answers at once.

    python3 bench/bench_generate.py [--rows 3000] [--concurrency 16] [--repeat 3]
    python3 bench/bench_generate.py --compare /tmp/old/generate.py --repeat 6

The stand-in (this script with --serve, in its own process so it does not
share generate.py's interpreter) answers every chat completion immediately
with a fixed route, over HTTP/1.1 connections it keeps open as long as the
client does (as uvicorn, vLLM's server, and llama-server do).  Each repeat
runs generate.py in a fresh process on a new output file and checks that it
holds one line per row; the median of the repeats is reported.  With
``--compare``, another generate.py (an older checkout's, say
``git worktree add /tmp/old REV``) runs in turn with this one, in
alternating order, so that a machine shared with other work slows both
alike.  The target: the runner is never the bottleneck, at least 200 rows/s
at --concurrency 16.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_ROWS_PER_S = 200

ANSWER = json.dumps({
    "id": "bench", "object": "chat.completion", "model": "bench-model",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": json.dumps({
            "line_sequence": ["地铁1号线(甲--乙)"],
            "station_sequence": ["bus-1", "bus-2", "bus-3"],
            "total_distance": "3.0公里", "total_time": "20分钟", "total_fare": "3",
            "start_transfer_mode": "步行", "end_transfer_mode": "步行",
            "start_transfer_distance": "300米", "end_transfer_distance": "200米"},
            ensure_ascii=False)}}],
    "usage": {"prompt_tokens": 300, "completion_tokens": 120, "total_tokens": 420},
}).encode("utf-8")


class InstantHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Like uvicorn (asyncio) and other servers: no Nagle delay on the body
    # that follows the head (else a client's delayed ACK holds each answer
    # of a kept connection up to 40 ms).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)


def serve():
    server = ThreadingHTTPServer(("127.0.0.1", 0), InstantHandler)
    server.daemon_threads = True
    server.request_queue_size = 128
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


def write_input(path, rows):
    prompt = {"query": "从甲站到乙站怎么走", "start": "116.40,39.90", "end": "116.45,39.92",
              "city": "北京"}
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["indexid", "system_prompt", "sft_prompt", "sft_label"])
        for number in range(rows):
            writer.writerow(["row%06d" % number, "你是一个公交路线规划助手。",
                             json.dumps(prompt, ensure_ascii=False), "{}"])


def count_lines(path):
    with open(path, "rb") as handle:
        return handle.read().count(b"\n")


def run_once(script, url, source, out, rows, concurrency):
    """One run of ``script`` -> rows per second, or None when it failed."""
    start = time.perf_counter()
    status = subprocess.call(
        [sys.executable, script, "--input", source, "--api_url", url, "--model", "bench-model",
         "--out", out, "--concurrency", str(concurrency)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if status != 0 or count_lines(out) != rows:
        sys.stderr.write("bench_generate: %s failed (exit %d, %d lines)\n"
                         % (script, status, count_lines(out) if os.path.exists(out) else 0))
        return None
    return rows / wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", metavar="GENERATE_PY",
                        help="another generate.py to time in turn with this one")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0

    scripts = [("this checkout", os.path.join(REPO, "generate.py"))]
    if args.compare:
        scripts.append(("--compare", os.path.abspath(args.compare)))
    rates = dict((name, []) for name, _ in scripts)
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"],
                              stdout=subprocess.PIPE)
    try:
        port = int(server.stdout.readline())
        url = "http://127.0.0.1:%d/v1" % port
        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "input.csv")
            write_input(source, args.rows)
            for repeat in range(args.repeat):
                order = scripts if repeat % 2 == 0 else scripts[::-1]
                for number, (name, script) in enumerate(order):
                    out = os.path.join(folder, "preds%d-%d.jsonl" % (repeat, number))
                    rate = run_once(script, url, source, out, args.rows, args.concurrency)
                    if rate is None:
                        return 1
                    rates[name].append(rate)
    finally:
        server.terminate()
        server.wait()
    for name, _ in scripts:
        print("generate.py (%s)  rows %d  concurrency %d  median of %d: %.0f rows/s  "
              "(runs: %s; target %d)"
              % (name, args.rows, args.concurrency, args.repeat,
                 statistics.median(rates[name]), ", ".join("%.0f" % r for r in rates[name]),
                 TARGET_ROWS_PER_S))
    return 0 if statistics.median(rates[scripts[0][0]]) >= TARGET_ROWS_PER_S else 1


if __name__ == "__main__":
    sys.exit(main())

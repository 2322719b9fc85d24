#!/usr/bin/env python3
"""Speed of generate.py itself: rows/s against a stand-in server that answers at once.

    python3 bench/bench_generate.py [--rows 3000] [--concurrency 16] [--repeat 3]

The stand-in (this script with --serve, in its own process so it does not
share generate.py's interpreter) answers every chat completion immediately
with a fixed route.  Each repeat runs generate.py in a fresh process on a new
output file and checks that it holds one line per row.  The target: the runner
is never the bottleneck, at least 200 rows/s at --concurrency 16.
"""

import argparse
import csv
import json
import os
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0

    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"],
                              stdout=subprocess.PIPE)
    try:
        port = int(server.stdout.readline())
        url = "http://127.0.0.1:%d/v1" % port
        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "input.csv")
            write_input(source, args.rows)
            best = None
            for repeat in range(args.repeat):
                out = os.path.join(folder, "preds%d.jsonl" % repeat)
                start = time.perf_counter()
                status = subprocess.call(
                    [sys.executable, os.path.join(REPO, "generate.py"), "--input", source,
                     "--api_url", url, "--model", "bench-model", "--out", out,
                     "--concurrency", str(args.concurrency)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wall = time.perf_counter() - start
                if status != 0 or count_lines(out) != args.rows:
                    sys.stderr.write("bench_generate: run %d failed (exit %d, %d lines)\n"
                                     % (repeat + 1, status, count_lines(out)))
                    return 1
                best = wall if best is None else min(best, wall)
    finally:
        server.terminate()
        server.wait()
    rate = args.rows / best
    print("generate.py  rows %d  concurrency %d  best of %d: %.2f s  %.0f rows/s  (target %d)"
          % (args.rows, args.concurrency, args.repeat, best, rate, TARGET_ROWS_PER_S))
    return 0 if rate >= TARGET_ROWS_PER_S else 1


if __name__ == "__main__":
    sys.exit(main())

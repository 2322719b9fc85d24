#!/usr/bin/env python3
"""Speed of the reward (transitlm/reward/) on the 150,000-station scale network.

Builds (once) the scale network and 10,000-row files with bench/benchmark.py
(data/make_demo.py's scale options) into bench/scale/, makes the station
cache as every run after the first one on a station file finds it, and
measures, in one run so that both sides see the same spell of the machine:

1. per row, for each benchmark: the evaluator's own cost (``evaluate.py
   --workers 1`` on the 10,000-row file less the same on its first 100
   rows, divided by the rows between; best of --repeat), in its fastest run
   (``--quiet``: the answers in the file, read as strict JSON, no details)
   and in the run whose details lines the reward's terms equal (the same
   answers as a ``--predictions`` file, read as a model writes them, with
   ``--details``), against transitlm.reward.score in process on the same
   answers (the scorer made before the clock starts; best of --repeat);
2. a batch of --rows completions (the single-route file's answers, and a
   batch mixing the four benchmarks) through verl's compute_score_batch, the
   ground truths as ``reward.py prepare --format verl`` writes them;
3. the same completions through ``POST /get_reward`` of ``reward.py serve``
   (its own process): in requests of 512 rows from 2 connections, and one
   row per request from 16 connections as OpenRLHF sends them; the queries a
   ChatML prompt followed by the answer, the labels as ``prepare --format
   openrlhf`` writes them, the bodies encoded before the clock starts.

    python3 bench/bench_reward.py [--rows 8192] [--repeat 3] [--stations 150000]
                                  [--data DIR] [--profile]

--profile prints where in-process scoring spends its time (cProfile).
Figures go in docs/performance.md.  Standard library only.
"""

import argparse
import csv
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
for folder in (REPO, HERE):
    if folder not in sys.path:
        sys.path.insert(0, folder)

import benchmark as scale  # noqa: E402  (bench/benchmark.py: the scale data)

FILES = {"single_route": "benchmark1_single_route_example.csv",
         "personalized": "benchmark2_personalized_example.csv",
         "diversity": "benchmark3_diversity_example.csv",
         "general_llm": "general_llm_example.csv"}
HEAD_ROWS = 100                  # the evaluator's fixed cost: a run on this many rows
BATCH_ROWS = 512                 # rows per request of the batched HTTP client
BATCH_CONNECTIONS = 2
SINGLE_CONNECTIONS = 16          # OpenRLHF: one row per request, many at once


def chatml(messages):
    """A ChatML prompt, the assistant's turn begun (what OpenRLHF's prompt holds)."""
    return "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"])
                   for m in messages) + "<|im_start|>assistant\n"


def read_rows(path, limit=None):
    csv.field_size_limit(1 << 30)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = []
        for row in csv.DictReader(handle):
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    return rows


def head_file(path, rows, folder):
    """The file's header and first ``rows`` rows, beside the bench's other outputs."""
    target = os.path.join(folder, "head%d-%s" % (rows, os.path.basename(path)))
    with open(path, encoding="utf-8", newline="") as source, \
            open(target, "w", encoding="utf-8", newline="") as out:
        reader, writer = csv.reader(source), csv.writer(out)
        for number, cells in enumerate(reader):
            writer.writerow(cells)
            if number >= rows:
                break
    return target


def predictions_file(rows, folder, name):
    """The rows' answers as a predictions file (JSON Lines)."""
    path = os.path.join(folder, "%s.predictions.jsonl" % name)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"indexid": row["index_id"],
                                     "generate_results": row["generate_results"]},
                                    ensure_ascii=False) + "\n")
    return path


def evaluator_command(name, path, stations, extra=()):
    command = [sys.executable, os.path.join(REPO, name, "evaluate.py"), "--input", path,
               "--station_info", stations, "--quiet", "--workers", "1"] + list(extra)
    if name == "general_llm":
        command += ["--line_info", os.path.join(os.path.dirname(stations), "line_info.csv")]
    return command


def best_of(repeat, work):
    """The shortest wall time of ``repeat`` runs of ``work()``."""
    best = None
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return best


def per_row(args, stations, env, out):
    """Part 1: the evaluator's per-row cost against the reward's, per benchmark.
    The runs alternate (evaluator runs, then the reward's, --repeat times) so
    that both see the same spells of a machine whose speed drifts; the best
    of each is kept."""
    from transitlm.reward.scoring import score, scorer_for
    print("\n1. per row (evaluator: 10,000 rows less %d, --workers 1; reward: score() in "
          "process; best of %d alternating runs)" % (HEAD_ROWS, args.repeat))
    print("%-14s %14s %16s %10s %8s %8s %12s" % (
        "benchmark", "eval --quiet", "eval --details", "reward", "ratio", "ratio",
        "scorer made"))
    for name, file_name in FILES.items():
        path = os.path.join(args.data, file_name)
        rows = read_rows(path)
        head_path = head_file(path, HEAD_ROWS, out)
        modes = ((), ("--predictions", predictions_file(rows, out, name), "--details",
                      os.path.join(out, "details.jsonl")))
        commands = [(evaluator_command(name, path, stations, extra),
                     evaluator_command(name, head_path, stations, extra)) for extra in modes]
        started = time.perf_counter()
        scorer_for(name, station_info=stations)
        made = time.perf_counter() - started

        def run():
            for row in rows:
                score(row["generate_results"], row, name, station_info=stations)
        evaluator = [None] * len(modes)
        reward = None
        for _ in range(args.repeat):
            for index, (whole, head) in enumerate(commands):
                seconds = (scale.measure(whole, env)[0] - scale.measure(head, env)[0]) / (
                    len(rows) - HEAD_ROWS)
                evaluator[index] = seconds if evaluator[index] is None else \
                    min(evaluator[index], seconds)
            seconds = best_of(1, run) / len(rows)
            reward = seconds if reward is None else min(reward, seconds)
        print("%-14s %11.1f µs %13.1f µs %7.1f µs %7.2fx %7.2fx %10.2f s"
              % (name, evaluator[0] * 1e6, evaluator[1] * 1e6, reward * 1e6,
                 reward / evaluator[0], reward / evaluator[1], made), flush=True)


def prepared(path, layout, out, count):
    """The first ``count`` lines of a file prepared for ``layout``, and its rows."""
    from transitlm.reward.prepare import prepare
    target = os.path.join(out, "%s.%s.jsonl" % (os.path.basename(path), layout))
    # Under reference, as the figures have been measured (the general LLM's
    # labels would be refused without the protocol named: docs/reward.md).
    prepare(path, layout, target, protocol="reference")
    with open(target, encoding="utf-8") as handle:
        lines = [json.loads(line) for _, line in zip(range(count), handle)]
    return lines, read_rows(path, count)


def batches(args, out):
    """(label, completions, verl lines, openrlhf lines) of the batches measured."""
    single = os.path.join(args.data, FILES["single_route"])
    verl_lines, rows = prepared(single, "verl", out, args.rows)
    open_lines, _ = prepared(single, "openrlhf", out, args.rows)
    found = [("single_route", [row["generate_results"] for row in rows], verl_lines, open_lines)]
    share = args.rows // len(FILES)
    mixed = ([], [], [])
    for name, file_name in FILES.items():
        path = os.path.join(args.data, file_name)
        verl_lines, rows = prepared(path, "verl", out, share)
        open_lines, _ = prepared(path, "openrlhf", out, share)
        mixed[0].extend(row["generate_results"] for row in rows)
        mixed[1].extend(verl_lines)
        mixed[2].extend(open_lines)
    found.append(("mixed (4 x %d)" % share,) + mixed)
    return found


def in_process_batch(args, stations, found):
    """Part 2: compute_score_batch, as verl's batch reward manager calls it."""
    from transitlm.reward.verl import compute_score_batch
    print("\n2. compute_score_batch in process (ground truths as prepare --format verl "
          "writes them)")
    for label, completions, verl_lines, _ in found:
        sources = [line["data_source"] for line in verl_lines]
        truths = [line["reward_model"]["ground_truth"] for line in verl_lines]
        extras = [line["extra_info"] for line in verl_lines]

        def run():
            results = compute_score_batch(data_sources=sources, solution_strs=completions,
                                          ground_truths=truths, extra_infos=extras,
                                          station_info=stations)
            assert len(results) == len(completions)
        run()                                   # the scorers made, as in a trainer's step
        seconds = best_of(args.repeat, run)
        print("  %-18s %6d completions  %6.2f s  %8.0f rows/s"
              % (label, len(completions), seconds, len(completions) / seconds), flush=True)


def start_service(stations, env, log_path):
    log = open(log_path, "w", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "reward.py"), "serve",
                             "--port", "0", "--station_info", stations],
                            stdout=subprocess.DEVNULL, stderr=log, env=env)
    log.close()
    for _ in range(1200):
        with open(log_path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("listening on http://"):
                    return proc, int(line.strip().rsplit(":", 1)[1])
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    with open(log_path, encoding="utf-8") as handle:
        raise SystemExit("reward.py serve did not start: %s" % handle.read())


def post_all(port, bodies, connections):
    """Post every body, ``connections`` clients at once; -> rows answered."""
    answered, problems = [0], []
    lock = threading.Lock()
    queue = list(reversed(bodies))

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    rows, body = queue.pop()
                conn.request("POST", "/get_reward", body=body,
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                payload = json.loads(response.read().decode("ascii"))
                with lock:
                    if response.status != 200 or len(payload["rewards"]) != rows:
                        problems.append((response.status, str(payload)[:200]))
                    answered[0] += rows
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if problems:
        raise SystemExit("the service answered wrongly: %s" % problems[:3])
    return answered[0]


def over_http(args, stations, env, found, out):
    """Part 3: POST /get_reward of reward.py serve, in its own process."""
    print("\n3. POST /get_reward (reward.py serve, its own process; bodies encoded before "
          "the clock)")
    proc, port = start_service(stations, env, os.path.join(out, "service.log"))
    try:
        for label, completions, _, open_lines in found:
            rows = []
            for completion, line in zip(completions, open_lines):
                prompt = chatml(line["input"])
                rows.append((prompt + completion + "<|im_end|>", prompt, line["label"]))
            for size, connections in ((BATCH_ROWS, BATCH_CONNECTIONS), (1, SINGLE_CONNECTIONS)):
                bodies = []
                for start in range(0, len(rows), size):
                    part = rows[start:start + size]
                    bodies.append((len(part), json.dumps(
                        {"query": [r[0] for r in part], "prompts": [r[1] for r in part],
                         "labels": [r[2] for r in part]}).encode("ascii")))
                post_all(port, bodies[:1], 1)             # warm: the scorers are made
                started = time.perf_counter()
                answered = post_all(port, bodies, connections)
                seconds = time.perf_counter() - started
                print("  %-18s %6d completions  %4d per request, %2d connections  %6.2f s  "
                      "%8.0f rows/s" % (label, answered, size, connections, seconds,
                                        answered / seconds), flush=True)
    finally:
        proc.terminate()
        proc.wait(60)


def profile(args, stations):
    import cProfile
    import pstats
    from transitlm.reward.scoring import score, scorer_for
    rows = read_rows(os.path.join(args.data, FILES["single_route"]), 4000)
    scorer_for("single_route", station_info=stations)
    profiler = cProfile.Profile()
    profiler.enable()
    for row in rows:
        score(row["generate_results"], row, "single_route", station_info=stations)
    profiler.disable()
    print("\nprofile: score() on %d single-route rows" % len(rows))
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192, help="completions per batch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stations", type=int, default=150000)
    parser.add_argument("--data", default=scale.SCALE_DIR, help="scale data folder")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    scale.build_scale_data(args.data, args.stations, scale.BASE_SAMPLES)
    stations = os.path.join(args.data, "station_info.csv")
    cache = os.path.join(args.data, "cache")
    env = dict(os.environ, TRANSITLM_CACHE_DIR=cache)
    os.environ["TRANSITLM_CACHE_DIR"] = cache
    print("station cache: %s (%s)" % (cache, scale.warm_station_cache(REPO, stations, cache)))
    print("calibration: 5M-step Python loop %.2f s (before)" % scale.calibration_seconds())
    out = tempfile.mkdtemp(prefix="transitlm-bench-reward-")
    try:
        per_row(args, stations, env, out)
        found = batches(args, out)
        in_process_batch(args, stations, found)
        over_http(args, stations, env, found, out)
        if args.profile:
            profile(args, stations)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("calibration: 5M-step Python loop %.2f s (after)" % scale.calibration_seconds())


if __name__ == "__main__":
    main()

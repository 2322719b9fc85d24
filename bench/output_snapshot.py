#!/usr/bin/env python3
"""Every output of the project's tools on fixed inputs, hashed: proof that a
change which should not change any figure or byte (a move, a refactor, a speed
change) did not.

    python3 bench/output_snapshot.py --write before.json            # on the old code
    python3 bench/output_snapshot.py --check before.json            # on the new code
    python3 bench/output_snapshot.py --check before.json --against REV
                                    # REV checked out in a temporary worktree

It runs, into a temporary folder and from copies of the inputs placed there
(so no path of the checkout reaches an output):

- the four evaluators on the bundled examples and on every ``../shared/parity``
  case set, under both protocols, each writing a run folder (report.json,
  details.jsonl, report.txt, report.html) and its stdout;
- ``compare.py`` on two runs of each benchmark in every format, with the
  breakdowns, JSON and HTML;
- ``generate.py`` against a stand-in chat server on loopback (answers made
  from the row's label), with ``--evaluate``;
- ``general_llm/server.py`` on the bundled files: its answers (headers but the
  date) to fixed requests, good and hostile (framing, limits, bad JSON), its
  log lines (times left out), and the general-LLM evaluator run through it;
- ``data/make_demo.py``, ``data/import_gtfs.py`` on a ``../shared/gtfs`` feed
  and ``data/make_benchmark.py`` on its output.

and writes (or checks) the SHA-256 of every file and of every command's exit
status and stdout.  Standard library only.
"""

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(REPO), "shared")

EVALUATORS = (("single_route", "benchmark1_single_route_example.csv", "b1.csv"),
              ("personalized", "benchmark2_personalized_example.csv", "b2.csv"),
              ("diversity", "benchmark3_diversity_example.csv", "b3.csv"),
              ("general_llm", "general_llm_example.csv", "general.csv"))
PROTOCOLS = ("reference", "paper")


class _Chat(BaseHTTPRequestHandler):
    """A chat-completions stand-in: answers each prompt with a fixed text
    derived from the prompt (deterministic)."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = json.loads(body.decode("utf-8"))
        prompt = request["messages"][-1]["content"]
        answer = self.server.answers.get(prompt, "{}")
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        data = payload.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def run(code_dir, work, args, name, results, cwd=None, moment=None):
    """Runs one command of code_dir; records its exit status and stdout
    (``moment``: text of the moment, such as a port, written as <MOMENT>)."""
    env = dict(os.environ, TRANSITLM_CACHE_DIR="off", PYTHONHASHSEED="0")
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run([sys.executable] + args, cwd=cwd or work, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = done.stdout.replace(code_dir.encode("utf-8"), b"<CODE>")
    if moment:
        out = out.replace(moment.encode("utf-8"), b"<MOMENT>")
    # Wall times and rates are the only text that changes from run to run.
    out = b"\n".join(line for line in out.split(b"\n")
                     if b"wall time" not in line and b"rows/s" not in line)
    if name == "generate":  # its --evaluate signature holds the answers' hash (latency)
        out = b"\n".join(line for line in out.split(b"\n") if b"signature: " not in line)
    results["cmd:" + name] = "%d %s" % (done.returncode, hashlib.sha256(out).hexdigest())
    if done.returncode not in (0,) and not name.startswith("expect-fail"):
        sys.stderr.write("%s exited %d: %s\n" % (name, done.returncode,
                                                   done.stderr.decode("utf-8", "replace")[-2000:]))


def snapshot(code_dir):
    results = {}
    code_dir = os.path.realpath(code_dir)
    work = tempfile.mkdtemp(prefix="snapshot-")
    try:
        _snapshot(code_dir, work, results)
        for root, _, files in os.walk(work):
            for name in files:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, work)
                if rel.startswith("in" + os.sep):
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
                if name == "run.json":
                    # When and where a run was made changes from run to run;
                    # the rest of run.json is compared.
                    record = json.loads(data.decode("utf-8"))
                    record.pop("created", None)
                    record["command"] = [part.replace(code_dir, "<CODE>")
                                         for part in record.get("command", [])]
                    data = json.dumps(record, sort_keys=True).encode("utf-8")
                elif name == "network.json":
                    # It names the network's files by their absolute paths,
                    # which lie in this run's temporary folder.
                    data = data.replace(work.encode("utf-8"), b"<WORK>")
                elif name.endswith(".settings.json"):
                    # The stand-in server listens on a port of the moment.
                    record = json.loads(data.decode("utf-8"))
                    record["api_url"] = "<STAND-IN>"
                    data = json.dumps(record, sort_keys=True).encode("utf-8")
                results["file:" + rel] = hashlib.sha256(data).hexdigest()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dict(sorted(results.items()))


def _snapshot(code, work, results):
    inputs = os.path.join(work, "in")
    os.makedirs(inputs)
    # Case sets: bundled data and the parity folders, copied so paths are equal.
    cases = {"bundled": {}}
    for _, example, _short in EVALUATORS:
        shutil.copy(os.path.join(code, "data", example), inputs)
    for name in ("station_info.csv", "line_info.csv"):
        shutil.copy(os.path.join(code, "data", name), inputs)
    cases["bundled"] = {evaluator: os.path.join("in", example) for evaluator, example, _ in EVALUATORS}
    cases["bundled"]["_dir"] = "in"
    parity = os.path.join(SHARED, "parity")
    if os.path.isdir(parity):
        for case in sorted(os.listdir(parity)):
            source = os.path.join(parity, case)
            if not os.path.isdir(source):
                continue
            target = os.path.join(inputs, case)
            shutil.copytree(source, target)
            cases[case] = {"_dir": os.path.join("in", case)}
            for evaluator, _, short in EVALUATORS:
                if os.path.exists(os.path.join(target, short)):
                    cases[case][evaluator] = os.path.join("in", case, short)
    for case, files in sorted(cases.items()):
        folder = files["_dir"]
        for evaluator, _, _ in EVALUATORS:
            if evaluator not in files:
                continue
            for protocol in PROTOCOLS:
                for field in ("generate_results", "sft_label"):
                    out = os.path.join("runs", case, "%s-%s-%s" % (evaluator, protocol, field))
                    args = [os.path.join(code, evaluator, "evaluate.py"), "--input", files[evaluator],
                            "--station_info", os.path.join(folder, "station_info.csv"),
                            "--protocol", protocol, "--input_field", field, "--out", out,
                            "--workers", "1"]
                    if evaluator == "general_llm":
                        args += ["--line_info", os.path.join(folder, "line_info.csv")]
                    run(code, work, args, "%s/%s" % (case, out), results)
    # compare.py: the model against its labels, every format.
    for case in ("bundled", "generated"):
        if case not in cases:
            continue
        for evaluator, _, _ in EVALUATORS:
            if evaluator not in cases[case]:
                continue
            first = os.path.join("runs", case, "%s-reference-generate_results" % evaluator)
            second = os.path.join("runs", case, "%s-reference-sft_label" % evaluator)
            for fmt in ("text", "markdown", "latex", "csv"):
                args = [os.path.join(code, "compare.py"), first, second, "--format", fmt,
                        "--bootstrap", "200", "--by", "city", "--by", "failure"]
                if evaluator == "personalized":
                    args += ["--by", "req_type"]
                run(code, work, args, "compare/%s/%s/%s" % (case, evaluator, fmt), results)
            out = os.path.join("compare", case, evaluator)
            os.makedirs(os.path.join(work, out), exist_ok=True)
            args = [os.path.join(code, "compare.py"), first, second, "--bootstrap", "200",
                    "--names", "model,label", "--by", "city", "--json", os.path.join(out, "c.json"),
                    "--html", os.path.join(out, "c.html")]
            run(code, work, args, "compare/%s/%s/files" % (case, evaluator), results)
    # generate.py against a stand-in server that answers with the labels.
    answers = {}
    with open(os.path.join(work, cases["bundled"]["single_route"]), encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            answers[row["sft_prompt"]] = row["sft_label"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    server.answers = answers
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/v1" % server.server_address[1]
        args = [os.path.join(code, "generate.py"), "--input", cases["bundled"]["single_route"],
                "--api_url", url, "--model", "stand-in", "--out", os.path.join("gen", "b1.jsonl"),
                "--concurrency", "1", "--evaluate", "--eval_out", os.path.join("gen", "b1.run")]
        os.makedirs(os.path.join(work, "gen"), exist_ok=True)
        run(code, work, args, "generate", results)
    finally:
        server.shutdown()
        server.server_close()
    # The answers' latency is the one field that changes from run to run: the
    # file is hashed without it, and so is the run folder of --evaluate (its
    # report holds the file's hash), scored again from the normalized file.
    answers_path = os.path.join(work, "gen", "b1.jsonl")
    if os.path.exists(answers_path):
        with open(answers_path, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle]
        for line in lines:
            line.pop("latency_s", None)
        with open(os.path.join(work, "gen", "b1.normalized.jsonl"), "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
        os.remove(answers_path)
        shutil.rmtree(os.path.join(work, "gen", "b1.run"), ignore_errors=True)
        run(code, work, [os.path.join(code, "single_route", "evaluate.py"), "--input",
                         cases["bundled"]["single_route"], "--predictions",
                         os.path.join("gen", "b1.normalized.jsonl"), "--station_info",
                         os.path.join("in", "station_info.csv"), "--out",
                         os.path.join("gen", "b1.rescored"), "--workers", "1"], "generate/rescored", results)
    route_eval_service(code, work, results)
    # Data tools.
    run(code, work, [os.path.join(code, "data", "make_demo.py"), "--out", "demo"], "make_demo", results)
    feed = os.path.join(SHARED, "gtfs", "caltrain.zip")
    if os.path.exists(feed):
        run(code, work, [os.path.join(code, "data", "import_gtfs.py"), feed, "--city", "Caltrain",
                         "--out", "caltrain"],
            "import_gtfs", results)
        run(code, work, [os.path.join(code, "data", "make_benchmark.py"), "--network", "caltrain",
                         "--out", "caltrain-bench", "--samples", "20"], "make_benchmark", results)


# Requests sent to the route-eval service as raw bytes: (name, request).
_CASE = ('{"city": "\u5317\u4eac", "start": [116.43, 39.92], "end": [116.34, 39.86], "pred": '
         '{"line_sequence": ["\u5730\u94c12\u53f7\u7ebf"], "station_name": ["a", "b"], '
         '"start_transfer_mode": "\u6b65\u884c", "end_transfer_mode": "\u6b65\u884c"}}')
_BATCH = ('{"cases": [%s, 7, {"city": "x"}]}' % _CASE).encode("utf-8")


def _post(body, head=b"", path=b"/api/eval/route/batch", version=b"HTTP/1.1"):
    length = b"Content-Length: %d\r\n" % len(body) if b"Content-Length" not in head \
        and b"Transfer-Encoding" not in head else b""
    return (b"POST " + path + b" " + version + b"\r\nHost: t\r\nConnection: close\r\n" + head
            + length + b"\r\n" + body)


SERVICE_REQUESTS = (
    ("healthz", b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("head", b"HEAD /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("batch", _post(_BATCH)),
    ("empty", _post(b'{"cases": []}')),
    ("malformed", _post(b'{"cases": [')),
    ("not-utf8", _post(b'\xff\xfe{}')),
    ("not-object", _post(b'[1, 2]')),
    ("no-cases", _post(b'{"case": []}')),
    ("cases-not-list", _post(b'{"cases": {"a": 1}}')),
    ("deep", _post(b'{"cases": ' + b"[" * 300 + b"]" * 300 + b"}")),
    ("too-many", _post(b'{"cases": [' + b",".join([b"0"] * 1001) + b"]}")),
    ("huge-int", _post(b'{"cases": [{"city": "x", "start": [' + b"9" * 5000 + b', 1]}]}')),
    ("405", b"GET /api/eval/route/batch HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("404", b"GET /nowhere?x=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("501", b"BREW /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("control", b"GET /\x1b[31mred HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("411", b"POST /api/eval/route/batch HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    ("plus-length", _post(b'{"cases": []}', b"Content-Length: +13\r\n")),
    ("two-lengths", _post(b'{"cases": []}', b"Content-Length: 13\r\nContent-Length: 13\r\n")),
    ("te-and-cl", _post(b'{"cases": []}', b"Transfer-Encoding: chunked\r\nContent-Length: 13\r\n")),
    ("te-gzip", _post(b'{"cases": []}', b"Transfer-Encoding: gzip, chunked\r\n")),
    ("te-http10", _post(b'{"cases": []}', b"Transfer-Encoding: chunked\r\n", version=b"HTTP/1.0")),
    ("chunked", _post(b'6\r\n{"case\r\n7\r\ns": []}\r\n0\r\n\r\n', b"Transfer-Encoding: chunked\r\n")),
    ("bad-chunk", _post(b'zz\r\n', b"Transfer-Encoding: chunked\r\n")),
    ("huge-length", _post(b"", b"Content-Length: 99999999999\r\n")),
    ("head-too-large", b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"),
    ("bad-field", _post(b'{"cases": []}', b"Content-Length : 13\r\n")),
)


def _exchange(port, request):
    """Send raw bytes; -> everything answered until the server closed, with
    the Date header (the time of the moment) left out."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        try:
            sock.sendall(request)
        except OSError:
            pass
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        sock.close()
    return re.sub(rb"\r\nDate: [^\r]*", b"", b"".join(chunks))


def route_eval_service(code, work, results):
    """general_llm/server.py of ``code``: answers, log lines, and the evaluator through it."""
    log_path = os.path.join(work, "service.log")
    env = dict(os.environ, TRANSITLM_CACHE_DIR="off", PYTHONHASHSEED="0")
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, os.path.join(code, "general_llm", "server.py"),
                                 "--station_info", os.path.join("in", "station_info.csv"),
                                 "--line_info", os.path.join("in", "line_info.csv"),
                                 "--port", "0", "--read_timeout", "2"],
                                cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        port = None
        for _ in range(300):
            with open(log_path, encoding="utf-8") as handle:
                found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", handle.read())
            if found or proc.poll() is not None:
                port = found and int(found.group(1))
                break
            time.sleep(0.1)
        if port is None:
            sys.stderr.write("route-eval service did not start\n")
            return
        for name, request in SERVICE_REQUESTS:
            answer = _exchange(port, request)
            results["service:" + name] = hashlib.sha256(answer).hexdigest()
        url = "http://127.0.0.1:%d" % port
        out = os.path.join("runs", "via-service")
        run(code, work, [os.path.join(code, "general_llm", "evaluate.py"), "--input",
                         os.path.join("in", "general_llm_example.csv"), "--station_info",
                         os.path.join("in", "station_info.csv"), "--line_info",
                         os.path.join("in", "line_info.csv"), "--api_url", url, "--out", out,
                         "--workers", "1"], "general_llm/via-service", results, moment=url)
        for name in os.listdir(os.path.join(work, out)):   # the URL holds a port of the moment
            path = os.path.join(work, out, name)
            with open(path, "rb") as handle:
                data = handle.read()
            with open(path, "wb") as handle:
                handle.write(data.replace(url.encode("ascii"), b"<MOMENT>"))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    results["service:exit"] = str(proc.returncode)
    with open(log_path, encoding="utf-8") as handle:
        lines = [re.sub(r" [0-9.]+ ms$", " <MS>", line.rstrip("\n")) for line in handle]
    os.remove(log_path)
    lines = [re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<PORT>", line) for line in lines]
    # Requests are answered in order, but the evaluator's batches follow its own clock.
    results["service:log"] = hashlib.sha256("\n".join(sorted(lines)).encode("utf-8")).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="JSON", help="write the snapshot")
    group.add_argument("--check", metavar="JSON", help="compare with a snapshot written before")
    parser.add_argument("--against", metavar="REV",
                        help="snapshot git revision REV (in a temporary worktree) instead of this checkout")
    args = parser.parse_args(argv)
    code = REPO
    worktree = None
    if args.against:
        worktree = tempfile.mkdtemp(prefix="snapshot-rev-")
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", "-q", worktree, args.against],
                       check=True)
        code = worktree
    try:
        results = snapshot(code)
    finally:
        if worktree:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", worktree])
    if args.write:
        with open(args.write, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1, sort_keys=True)
            handle.write("\n")
        print("%d outputs hashed into %s" % (len(results), args.write))
        return 0
    with open(args.check, encoding="utf-8") as handle:
        before = json.load(handle)
    differ = sorted(k for k in set(before) | set(results) if before.get(k) != results.get(k))
    for key in differ:
        print("differs: %s (%s -> %s)" % (key, before.get(key, "absent"), results.get(key, "absent")))
    print("%d outputs, %d differ" % (len(results), len(differ)))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every command the README shows runs (issue 21): the ```sh blocks are read
from README.md and run in order, from a sandbox that mirrors the repository
(its files linked, its outputs kept apart), with a stand-in chat server where
a command talks to a model and a small GTFS feed where one reads a feed."""

import atexit
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support import REPO
from tests.support.services import send_json, serve_in_background, stop_serving
from tests.support.lane import Background, suite_environment

MODEL_URL = "http://127.0.0.1:8000/v1"      # the README's model server
TEST_COMMAND = "python3 -m unittest discover -s tests -t ."


def shell_blocks(path):
    """The commands of a Markdown file's ```sh blocks, in order (comments and
    blank lines dropped)."""
    commands, inside = [], False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            stripped = line.strip()
            if stripped.startswith("```"):
                inside = stripped == "```sh" if not inside else False
                continue
            if inside and stripped and not stripped.startswith("#"):
                commands.append(stripped)
    return commands


class _Chat(BaseHTTPRequestHandler):
    """Answers every prompt with the label of its row."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])).decode("utf-8"))
        answer = self.server.answers.get(body["messages"][-1]["content"], "{}")
        send_json(self, 200, {"choices": [{"message": {"role": "assistant", "content": answer},
                                           "finish_reason": "stop"}]})

    def log_message(self, *args):
        pass


def small_feed(path):
    """A GTFS zip of one town: two lines crossing at a shared stop, a day of
    service (enough for make_benchmark to find trips)."""
    stops = [("s%d" % i, "Stop %d" % i, 40.0 + 0.01 * i, -75.0) for i in range(10)]
    stops += [("t%d" % i, "Cross %d" % i, 40.05, -75.05 + 0.01 * i) for i in range(10)]
    tables = {
        "agency.txt": [("agency_id", "agency_name", "agency_url", "agency_timezone"),
                       ("a", "Springfield Transit", "http://example.invalid", "America/New_York")],
        "stops.txt": [("stop_id", "stop_name", "stop_lat", "stop_lon")] + stops,
        "routes.txt": [("route_id", "agency_id", "route_short_name", "route_long_name",
                        "route_type"),
                       ("r1", "a", "1", "North South", "1"), ("r2", "a", "2", "East West", "3")],
        "calendar.txt": [("service_id", "monday", "tuesday", "wednesday", "thursday", "friday",
                          "saturday", "sunday", "start_date", "end_date"),
                         ("wk", "1", "1", "1", "1", "1", "1", "1", "20260101", "20261231")],
        "trips.txt": [("route_id", "service_id", "trip_id", "direction_id")],
        "stop_times.txt": [("trip_id", "arrival_time", "departure_time", "stop_id",
                            "stop_sequence")],
    }
    for route, line in (("r1", [s[0] for s in stops[:10]]), ("r2", [s[0] for s in stops[10:]])):
        for direction, sequence in ((0, line), (1, line[::-1])):
            for start in range(6 * 60, 22 * 60, 15):
                trip = "%s-%d-%d" % (route, direction, start)
                tables["trips.txt"].append((route, "wk", trip, str(direction)))
                for order, stop in enumerate(sequence):
                    minute = start + 3 * order
                    clock = "%02d:%02d:00" % (minute // 60, minute % 60)
                    tables["stop_times.txt"].append((trip, clock, clock, stop, str(order + 1)))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, rows in tables.items():
            archive.writestr(name, "\n".join(",".join(map(str, row)) for row in rows) + "\n")


def run_readme_commands():
    """Every ```sh command of the README but the test command, in order, in a
    sandbox mirroring the repository -> (sandbox, [(command, exit status,
    stdout, stderr)]); it stops at the first that fails.  The sandbox is
    removed at exit (the run starts as this module is loaded: README_RUN)."""
    commands = [c for c in shell_blocks(os.path.join(REPO, "README.md")) if c != TEST_COMMAND]
    tmp = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, tmp, True)
    sandbox = os.path.join(tmp, "repo")
    os.mkdir(sandbox)
    for name in os.listdir(REPO):
        if name not in ("runs", ".git"):
            os.symlink(os.path.join(REPO, name), os.path.join(sandbox, name))
    answers = {}
    for name in os.listdir(os.path.join(REPO, "data")):
        if name.endswith("_example.csv"):
            with open(os.path.join(REPO, "data", name), encoding="utf-8", newline="") as f:
                for row in csv.DictReader(f):
                    answers[row["sft_prompt"]] = row["sft_label"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    server.answers = answers
    thread = serve_in_background(server)
    url = "http://127.0.0.1:%d/v1" % server.server_address[1]
    env = suite_environment(TRANSITLM_CACHE_DIR="off")
    env.pop("OPENAI_API_KEY", None)
    results = []
    try:
        for command in commands:
            argv = shlex.split(command.replace(MODEL_URL, url), comments=True)
            for arg in argv:
                if re.match(r"^path/to/.*\.zip$", arg) and not os.path.exists(
                        os.path.join(sandbox, arg)):
                    small_feed(os.path.join(sandbox, arg))
            if argv[0] != "python3":
                results.append((command, None, "", "not a python3 command"))
                break
            done = subprocess.run([sys.executable] + argv[1:], cwd=sandbox, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=120)
            results.append((command, done.returncode, done.stdout, done.stderr))
            if done.returncode != 0:
                break
    finally:
        stop_serving(server, thread)
    return sandbox, results


# The commands run one after another, each a process of its own: they start
# as this module is loaded and go on beside the other tests.
README_RUN = Background(run_readme_commands)


class ReadmeCommands(unittest.TestCase):
    def test_the_readme_shows_its_two_set_up_commands(self):
        commands = shell_blocks(os.path.join(REPO, "README.md"))
        self.assertEqual(commands[:2], ["python3 single_route/evaluate.py", TEST_COMMAND])

    def test_every_command_in_the_readme_runs(self):
        sandbox, results = README_RUN.result()
        commands = [c for c in shell_blocks(os.path.join(REPO, "README.md")) if c != TEST_COMMAND]
        self.assertGreater(len(commands), 5)
        outputs = {}
        for command, status, stdout, stderr in results:
            with self.subTest(command=command):
                self.assertEqual(status, 0, stderr[-3000:])
                outputs[command] = stdout
        self.assertEqual(list(outputs), commands)        # every one ran
        # What the workflow promises to leave behind.
        for path in ("runs/answers/my-model-b1.jsonl", "runs/b1/my-model/report.html",
                     "runs/compare-b1.html"):
            self.assertTrue(os.path.exists(os.path.join(sandbox, path)), path)
        with open(os.path.join(sandbox, "runs", "b1", "my-model", "run.json")) as handle:
            self.assertEqual(json.load(handle)["generation"]["model"], "my-model")
        table = [out for command, out in outputs.items()
                 if "compare.py" in command and "--format latex" in command]
        self.assertEqual(len(table), 1)
        self.assertIn("\\toprule", table[0])           # the main table, booktabs
        self.assertIn("my-model", table[0])
        self.assertIn("labels", table[0])
        # The labels and the model agree on what they were scored on (the
        # input field and the labels' lack of a prompt are not part of it).
        for command, out in outputs.items():
            if "compare.py" in command:
                with self.subTest(command=command):
                    self.assertNotIn("signatures differ", out)
                    self.assertNotIn("differs between the runs", out)
                    self.assertIn("signature", out)
                    self.assertIn("|prompt:column#", out)


def doc_commands(path):
    """Commands shown in a docs page: lines of its code blocks (indented or
    fenced) that start with ``python3 SCRIPT``."""
    commands, fenced, going_on = [], False, False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            stripped = line.strip()
            if stripped.startswith("```"):
                fenced = not fenced
                continue
            if going_on:                      # a continuation line (ends the last with \)
                commands[-1] = commands[-1][:-1] + " " + stripped
            elif (fenced or line.startswith("    ")) and stripped.startswith("python3 "):
                commands.append(stripped)
            else:
                continue
            going_on = commands[-1].endswith("\\")
    return commands


def docs_script_commands():
    """(page, command, argv, the script it names, the help key) of every
    command a docs page shows that runs a script of the project."""
    docs = os.path.join(REPO, "docs")
    found = []
    for name in sorted(os.listdir(docs)):
        if not name.endswith(".md"):
            continue
        for command in doc_commands(os.path.join(docs, name)):
            argv = shlex.split(command, comments=True)
            if len(argv) < 2 or argv[1] in ("-", "-m", "-c"):
                continue
            # A loop over the evaluators ("$b/evaluate.py"): they share their flags.
            script = os.path.join(REPO, re.sub(r"^\$\{?\w+\}?/evaluate\.py$",
                                               "single_route/evaluate.py", argv[1]))
            # A command of a script with subcommands (harness.py lm-eval).
            subcommand = argv[2:3] if argv[2:3] and re.match(r"^[a-z][\w-]*$", argv[2]) else []
            found.append((name, command, argv, script, (script,) + tuple(subcommand)))
    return found


def docs_helps():
    """{help key: (exit status, flags its --help names, stderr)} of every script
    (and subcommand) the docs show, each asked once."""
    helps = {}
    for _, _, _, script, key in docs_script_commands():
        if key not in helps and os.path.isfile(script):
            done = subprocess.run([sys.executable] + list(key) + ["--help"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=60)
            helps[key] = (done.returncode, set(re.findall(r"--\w+", done.stdout)), done.stderr)
    return helps


# Each script's --help is a process of its own: asked as this module is loaded.
DOCS_HELPS = Background(docs_helps)


class DocsCommands(unittest.TestCase):
    """The docs show commands on data a reader has (the released dataset, a
    model server): each names a script that exists and only flags it has."""

    def test_every_docs_command_names_a_script_and_flags_it_has(self):
        helps = DOCS_HELPS.result()
        checked = 0
        for page, command, argv, script, key in docs_script_commands():
            with self.subTest(page=page, command=command):
                self.assertTrue(os.path.isfile(script), argv[1])
                status, flags_of_script, stderr = helps[key]
                self.assertEqual(status, 0, stderr)
                flags = {arg.split("=")[0] for arg in argv[2:] if arg.startswith("--")}
                self.assertEqual(flags - flags_of_script, set())
                checked += 1
        self.assertGreater(checked, 10)


def anchor(heading):
    """GitHub's anchor of a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class DocsLinks(unittest.TestCase):
    def test_every_link_between_the_pages_resolves(self):
        pages = [os.path.join(REPO, "README.md")] + [
            os.path.join(REPO, "docs", n) for n in sorted(os.listdir(os.path.join(REPO, "docs")))
            if n.endswith(".md")]
        anchors = {}
        for page in pages:
            with open(page, encoding="utf-8") as handle:
                anchors[os.path.realpath(page)] = {anchor(line.lstrip("#"))
                                                   for line in handle if line.startswith("#")}
        checked = 0
        for page in pages:
            with open(page, encoding="utf-8") as handle:
                text = handle.read()
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, fragment = target.partition("#")
                full = os.path.realpath(os.path.join(os.path.dirname(page), path)) if path \
                    else os.path.realpath(page)
                with self.subTest(page=os.path.basename(page), link=target):
                    self.assertTrue(os.path.exists(full), target)
                    if fragment:
                        self.assertIn(fragment, anchors.get(full, set()), target)
                checked += 1
        self.assertGreater(checked, 20)


if __name__ == "__main__":
    unittest.main()

"""transitlm/evaluation/chat_messages.py: one prompt for a row everywhere (issue 39.2).

generate.py, harness.py lm-eval and reward.py prepare send the same chat
messages for every bundled row, for a file without the system_prompt column
and for one with empty cells; the rule itself (--system_prompt_file, a cell
with text, the benchmark's default); the record of a run's prompt and its
part of the signature; compare.py tells runs asked different questions
apart and lets the labels (asked nothing) agree with any."""

import contextlib
import csv
import hashlib
import io
import json
import os
import tempfile
import unittest

import transitlm
from tests.support import REPO
from tests.support.services import completion
from transitlm.evaluation import chat_messages
from transitlm.compare.comparability import comparability_notes, shared_signature
from transitlm.generate import chat
from transitlm.generate import cli as generate_cli
from transitlm.harness.cli import main as harness_main
from transitlm.harness.lm_eval_tasks import task_file_names, write_task_folder
from transitlm.evaluation.prompt_texts import benchmark_system_prompt
from transitlm.reward.cli import main as reward_main
from transitlm.reward.prepare import prepare

DATA = os.path.join(REPO, "data")
BUNDLED = {"single_route": "benchmark1_single_route_example.csv",
           "personalized": "benchmark2_personalized_example.csv",
           "diversity": "benchmark3_diversity_example.csv",
           "general_llm": "general_llm_example.csv"}


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Recorder(object):
    """generate.py's transport: keeps each request's messages, answers "{}"."""

    def __init__(self):
        self.messages = []

    def post(self, url, data, headers):
        self.messages.append(json.loads(data.decode("utf-8"))["messages"])
        return chat.Answer(200, {}, completion("{}"))


def rewrite(source, target, drop_column=False, blank_every=0):
    """A copy of a bundled file: without its system_prompt column, or with
    every n-th system_prompt cell blank (white space)."""
    with open(source, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    columns = [name for name in rows[0] if not (drop_column and name == "system_prompt")]
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        for number, row in enumerate(rows):
            if blank_every and number % blank_every == 0:
                row["system_prompt"] = "  "
            writer.writerow(row)
    return target


class SameMessagesEverywhere(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def generate(self, benchmark, path, *extra):
        recorder = Recorder()
        out = os.path.join(self.dir, "answers.jsonl")
        argv = ["--input", path, "--api_url", "http://127.0.0.1:9/v1", "--model", "m",
                "--out", out, "--restart", "--concurrency", "1", "--benchmark", benchmark]
        stdout, stderr = io.StringIO(), io.StringIO()
        status = generate_cli.run(argv + list(extra), {}, stdout, stderr, transport=recorder)
        self.assertEqual(status, 0, stderr.getvalue())
        with open(out + ".settings.json", encoding="utf-8") as handle:
            record = json.load(handle)["prompt"]
        return recorder.messages, record, stderr.getvalue()

    def harness(self, benchmark, path, system_prompt=None):
        out = os.path.join(self.dir, "tasks")
        settings = write_task_folder(out, [(benchmark, path)], overwrite=True,
                                     system_prompt=system_prompt)
        with open(os.path.join(out, task_file_names(benchmark)[0]), encoding="utf-8") as f:
            docs = [json.loads(line) for line in f]
        # lm-eval sends the doc's system_prompt (the task's description) as the
        # system message and its sft_prompt as the user message
        # (test_harness_lm_eval_run checks that against the harness itself).
        task = next(iter(settings["tasks"].values()))
        return ([chat_messages.chat_messages(doc["system_prompt"], doc["sft_prompt"]) for doc in docs],
                task["prompt"])

    def prepare(self, benchmark, path, system_prompt=None):
        out = os.path.join(self.dir, "trl.jsonl")
        # The general LLM's labels pass every check only under paper: prepare
        # refuses them under the default (docs/reward.md).
        preparer = prepare(path, "trl", out, benchmark, system_prompt=system_prompt,
                           protocol="paper" if benchmark == "general_llm" else None)
        with open(out, encoding="utf-8") as handle:
            return [json.loads(line)["prompt"] for line in handle], preparer.prompts.record()

    def expected(self, benchmark, path, override=None):
        with open(path, encoding="utf-8", newline="") as handle:
            return [chat_messages.row_messages(row.get("system_prompt"), row["sft_prompt"], benchmark,
                                         override) for row in csv.DictReader(handle)]

    def check_all_three(self, benchmark, path, source, override_file=None):
        override = None
        extra = ()
        if override_file is not None:
            override = chat_messages.read_prompt_file(override_file)
            extra = ("--system_prompt_file", override_file)
        expected = self.expected(benchmark, path, override)
        sent, generate_record, stderr = self.generate(benchmark, path, *extra)
        harness, harness_record = self.harness(benchmark, path, override)
        prepared, prepare_record = self.prepare(benchmark, path, override)
        self.assertEqual(len(expected), len(sent))
        self.assertEqual(sent, expected)
        self.assertEqual(harness, expected)
        self.assertEqual(prepared, expected)
        self.assertEqual(generate_record, harness_record)
        self.assertEqual(generate_record, prepare_record)
        self.assertEqual(generate_record["source"], source)
        return sent, generate_record, stderr

    def test_every_bundled_row(self):
        for benchmark, name in BUNDLED.items():
            with self.subTest(benchmark=benchmark):
                sent, record, stderr = self.check_all_three(
                    benchmark, os.path.join(DATA, name), "column")
                self.assertTrue(all(messages[0]["role"] == "system" for messages in sent))
                self.assertNotIn("system prompt", stderr)

    def test_a_file_without_the_column_gets_the_default_in_every_tool(self):
        for benchmark in ("single_route", "general_llm"):
            with self.subTest(benchmark=benchmark):
                path = rewrite(os.path.join(DATA, BUNDLED[benchmark]),
                               os.path.join(self.dir, "plain.csv"), drop_column=True)
                sent, record, stderr = self.check_all_three(benchmark, path, "default")
                default = benchmark_system_prompt(benchmark)
                self.assertEqual({messages[0]["content"] for messages in sent}, {default})
                self.assertEqual(record["sha256"], sha(default))
                self.assertIn("input has no system_prompt column: sent the default system "
                              "prompt of %s" % benchmark, stderr)

    def test_an_empty_cell_counts_as_no_cell(self):
        path = rewrite(os.path.join(DATA, BUNDLED["personalized"]),
                       os.path.join(self.dir, "blanks.csv"), blank_every=3)
        sent, record, stderr = self.check_all_three("personalized", path, "column+default")
        self.assertEqual(sent[0][0]["content"], benchmark_system_prompt("personalized"))
        self.assertIn("without a system_prompt cell: sent the default", stderr)

    def test_a_system_prompt_file_wins_and_an_empty_one_sends_none(self):
        path = os.path.join(DATA, BUNDLED["single_route"])
        mine = os.path.join(self.dir, "mine.txt")
        with open(mine, "w", encoding="utf-8") as handle:
            handle.write("Plan it.")
        sent, record, _ = self.check_all_three("single_route", path, "file", mine)
        self.assertEqual(record, {"source": "file", "sha256": sha("Plan it.")})
        with open(mine, "w", encoding="utf-8") as handle:
            handle.write("")
        sent, record, _ = self.check_all_three("single_route", path, "file", mine)
        self.assertTrue(all(len(messages) == 1 for messages in sent))


class PromptFileFlags(unittest.TestCase):
    """--system_prompt_file of harness.py lm-eval and reward.py prepare."""

    def test_a_prompt_file_in_each_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            mine = os.path.join(tmp, "mine.txt")
            with open(mine, "w", encoding="utf-8") as handle:
                handle.write("Plan it.")
            path = os.path.join(DATA, BUNDLED["single_route"])
            out, err = io.StringIO(), io.StringIO()
            status = harness_main(["lm-eval", "--input", path, "--out",
                                   os.path.join(tmp, "tasks"), "--system_prompt_file", mine],
                                  out, err)
            self.assertEqual(status, 0, err.getvalue())
            with open(os.path.join(tmp, "tasks", "transitlm_tasks.json")) as handle:
                task = json.load(handle)["tasks"]["transitlm_single_route"]
            self.assertEqual(task["prompt"], {"source": "file", "sha256": sha("Plan it.")})
            status = harness_main(["lm-eval", "--input", path, "--out",
                                   os.path.join(tmp, "t2"), "--system_prompt_file",
                                   os.path.join(tmp, "absent")], out, err)
            self.assertEqual(status, 2)
            self.assertIn("cannot read --system_prompt_file", err.getvalue())
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                status = reward_main(["prepare", "--input", path, "--format", "trl", "--out",
                                      os.path.join(tmp, "p.jsonl"), "--benchmark",
                                      "single_route", "--system_prompt_file", mine])
            self.assertEqual(status, 0)
            self.assertIn("system prompts: prompt:file#" + sha("Plan it.")[:8],
                          printed.getvalue())
            with contextlib.redirect_stderr(io.StringIO()) as errors:
                status = reward_main(["prepare", "--input", path, "--format", "trl", "--out",
                                      mine, "--system_prompt_file", mine])
            self.assertEqual(status, 2)
            self.assertEqual(errors.getvalue().count("\n"), 1)
            with open(mine, encoding="utf-8") as handle:
                self.assertEqual(handle.read(), "Plan it.")           # not written over


class Rule(unittest.TestCase):
    def test_the_order_of_the_sources(self):
        default = benchmark_system_prompt("diversity")
        self.assertEqual(chat_messages.system_prompt_for("S", "diversity", "F"), ("file", "F"))
        self.assertEqual(chat_messages.system_prompt_for("S", "diversity"), ("column", "S"))
        for cell in (None, "", " \t\n"):
            self.assertEqual(chat_messages.system_prompt_for(cell, "diversity"), ("default", default))
        self.assertEqual(chat_messages.row_messages(None, "u", "diversity", ""),
                         [{"role": "user", "content": "u"}])

    def test_the_record_of_a_run(self):
        tally = chat_messages.PromptTally()
        self.assertIsNone(tally.record())
        for _ in range(3):
            tally.add("column", "A")
        self.assertEqual(tally.record(), {"source": "column", "sha256": sha("A")})
        tally.add("default", "B")
        record = tally.record()
        self.assertEqual(record["source"], "column+default")
        ordered = hashlib.sha256("".join(h + "\n" for h in [sha("A")] * 3 + [sha("B")])
                                 .encode()).hexdigest()
        self.assertEqual(record["sha256"], ordered)
        self.assertEqual(chat_messages.valid_record(record), record)
        for bad in ({"source": "default+column", "sha256": ordered},
                    {"source": "column", "sha256": "ab"}, {"source": "x", "sha256": ordered},
                    [], None):
            self.assertIsNone(chat_messages.valid_record(bad), bad)

    def test_what_the_evaluator_records_and_signs(self):
        record = {"source": "default", "sha256": sha("x")}
        self.assertEqual(chat_messages.run_prompt(False, {"prompt": record}), record)
        self.assertEqual(chat_messages.run_prompt(True, {"prompt": record})["source"], "none")
        self.assertEqual(chat_messages.run_prompt(False, None)["source"], "unknown")
        self.assertEqual(chat_messages.run_prompt(False, {"prompt": {"source": "<b>"}})["source"],
                         "unknown")
        self.assertEqual(chat_messages.run_prompt(False, {"system_prompt_sha256": sha("y")}),
                         {"source": "file", "sha256": sha("y")})          # a 1.3.0 sidecar
        self.assertEqual(chat_messages.signature_part(record), "prompt:default#" + sha("x")[:8])
        self.assertEqual(chat_messages.signature_part({"source": "none", "sha256": None}),
                         "prompt:none")
        self.assertEqual(chat_messages.signature_part(None), "prompt:unknown")

    def test_a_run_records_the_prompt_of_its_predictions(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(DATA, BUNDLED["single_route"])
            predictions = os.path.join(tmp, "p.jsonl")
            with open(path, encoding="utf-8", newline="") as handle, \
                    open(predictions, "w", encoding="utf-8") as out:
                for row in csv.DictReader(handle):
                    out.write(json.dumps({"indexid": row["index_id"],
                                          "generate_results": row["sft_label"]}) + "\n")
            record = {"source": "column", "sha256": sha("S")}
            with open(predictions + ".settings.json", "w", encoding="utf-8") as handle:
                json.dump({"tool": "generate.py", "prompt": record}, handle)
            report, _ = transitlm.evaluate("single_route", input=path, predictions=predictions)
            self.assertEqual(report["inputs"]["prompt"], record)
            self.assertTrue(report["signature"].endswith("|prompt:column#" + sha("S")[:8]))
            labels, _ = transitlm.evaluate("single_route", input=path, input_field="sft_label")
            self.assertEqual(labels["inputs"]["prompt"], {"source": "none", "sha256": None})
            self.assertNotIn("field:", labels["signature"])
            self.assertEqual(labels["signature"].replace("prompt:none", ""),
                             report["signature"].replace("prompt:column#" + sha("S")[:8], ""))


class Run(object):
    def __init__(self, name, signature):
        self.name = name
        self.report = {"signature": signature}
        self.hashes = {"input": "b", "station_info": "a", "line_info": None}


class Compare(unittest.TestCase):
    BASE = "transitlm:9|single_route|protocol:reference|rows:3|stations:a|input:b"

    def runs(self, *prompt_parts):
        return [Run("r%d" % number, self.BASE + ("|" + part if part else ""))
                for number, part in enumerate(prompt_parts)]

    def test_the_labels_and_a_model_share_the_models_signature(self):
        runs = self.runs("prompt:none", "prompt:column#12345678")
        self.assertEqual(shared_signature(runs), self.BASE + "|prompt:column#12345678")
        self.assertEqual(comparability_notes(runs, False), ([], None))

    def test_runs_asked_different_questions_are_told_apart(self):
        runs = self.runs("prompt:none", "prompt:column#12345678", "prompt:default#abcdef01")
        self.assertIsNone(shared_signature(runs))
        notes, refusal = comparability_notes(runs, False)
        self.assertIsNone(refusal)
        self.assertEqual(notes, ["the runs were asked different questions (system prompts "
                                 "column#12345678 (r1), default#abcdef01 (r2)): their figures "
                                 "differ by model and prompt together"])

    def test_a_run_of_unknown_prompt_agrees_with_a_note(self):
        runs = self.runs("prompt:default#abcdef01", "prompt:unknown", "")
        self.assertEqual(shared_signature(runs), self.BASE + "|prompt:default#abcdef01")
        notes, _ = comparability_notes(runs, False)
        self.assertEqual(len(notes), 1)
        self.assertIn("r1, r2 record(s) no prompt", notes[0])
        self.assertEqual(comparability_notes(self.runs("prompt:none", "prompt:unknown"),
                                             False), ([], None))


if __name__ == "__main__":
    unittest.main()

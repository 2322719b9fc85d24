"""transitlm/reward/prepare.py, ``reward.py prepare``: a release file in each
trainer's layout, read back by that trainer's adapter exactly as the trainer
calls it, scores as scoring.score scores the original row; the layouts'
fields; the benchmark and the system prompt of a row; bad inputs exit 2 with
one line and leave nothing behind; the one command to verl's parquet.

How each trainer hands a prepared row to the adapter (from its sources):
- verl (verl/experimental/reward_loop/reward_manager/naive.py, run_single):
  compute_score(data_source=row["data_source"], solution_str=...,
  ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"]
  with num_turns and rollout_reward_scores added), all by keyword;
- OpenRLHF (openrlhf/utils/agent.py, SingleTurnAgentExecutor.execute):
  reward_func([query], [prompt], [label]), three positional lists, the prompt
  the --data.input_key messages through the chat template, the query that
  prompt and the response with its special tokens, the label the
  --data.label_key field;
- TRL (trl/trainer/grpo_trainer.py, GRPOTrainer._calculate_rewards): by
  keyword, prompts=, completions= (conversational: [[{"role": "assistant",
  "content": ...}]]), completion_ids=, trainer_state=, log_extra=,
  log_metric=, and every dataset column but "prompt" as a list.
"""

import csv
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

from tests.support import REPO
from tests.support.services import EXAMPLE_FILES, chatml, example_rows, read_lines, run_reward
from transitlm.io import csv_rows  # noqa: E402
from transitlm.evaluation.prompt_texts import benchmark_system_prompt  # noqa: E402
from transitlm.reward import openrlhf, prepare, trl, verl  # noqa: E402
from transitlm.reward import binding, row_protocol  # noqa: E402
from transitlm.reward.scoring import network_files, score  # noqa: E402

SCRIPT = os.path.join(REPO, "reward.py")
# The protocol each bundled file is prepared for, as docs/reward.md says to
# train them: the general LLM's labels pass every check only under paper.
PROTOCOL_OF = {"single_route": "reference", "personalized": "reference",
               "diversity": "reference", "general_llm": "paper"}


def prepared_for(benchmark):
    """prepare()'s keywords for a bundled file: its protocol, given when it
    is not the default (the general LLM's labels are refused under it)."""
    protocol = PROTOCOL_OF[benchmark]
    return {} if protocol == row_protocol.DEFAULT else {"protocol": protocol}


def cells(benchmark, index=0):
    """The sft_prompt and sft_label cells of a bundled row, as CSV text
    (prepare judges every row: they must be a row's own)."""
    row = example_rows(benchmark)[index]
    handle = io.StringIO()
    csv.writer(handle, lineterminator="").writerow([row["sft_prompt"], row["sft_label"]])
    return handle.getvalue()


def bundled_binding():
    """The network keys of a row prepared on the default station file (and
    the line file beside it): transitlm.reward.binding."""
    station, _ = network_files()
    return binding.row_fields(station, os.path.join(os.path.dirname(station), "line_info.csv"))


class PreparedTestCase(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write_csv(self, name, text):
        with open(self.path(name), "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        return self.path(name)

    def prepared(self, source, layout, **options):
        out = self.path("%s.%s.jsonl" % (os.path.basename(source), layout))
        prepare.prepare(source, layout, out, **options)
        return read_lines(out)


class RoundTripTest(PreparedTestCase):
    """Every bundled row, every layout: the adapter's score of the row's own
    answer is scoring.score's on the original row."""

    def test_each_layout_scores_as_the_original_row(self):
        # ... under the protocol the row was prepared for (the general LLM's
        # paper), with no protocol configured.
        calls = {"trl": 0, "verl": 0, "openrlhf": 0}
        logged = []
        differ = 0
        for benchmark, name in sorted(EXAMPLE_FILES.items()):
            source = os.path.join(REPO, "data", name)
            rows = example_rows(benchmark)
            layouts = {layout: self.prepared(source, layout, **prepared_for(benchmark))
                       for layout in prepare.FORMATS}
            for layout, lines in layouts.items():
                self.assertEqual(len(lines), len(rows), (benchmark, layout))
            for index, row in enumerate(rows):
                answer = row["generate_results"]
                want = score(answer, row, benchmark, protocol=PROTOCOL_OF[benchmark])
                other = "paper" if PROTOCOL_OF[benchmark] == "reference" else "reference"
                differ += want != score(answer, row, benchmark, protocol=other)
                with self.subTest(benchmark=benchmark, row=index):
                    v = layouts["verl"][index]
                    got = verl.compute_score(
                        data_source=v["data_source"], solution_str=answer,
                        ground_truth=v["reward_model"]["ground_truth"],
                        extra_info=dict(v["extra_info"], num_turns=None,
                                        rollout_reward_scores={}))
                    self.assertEqual(got, want)
                    o = layouts["openrlhf"][index]
                    prompt = chatml(o[prepare.OPENRLHF_INPUT_KEY])
                    got = openrlhf.reward_func([prompt + answer + "<|im_end|>"], [prompt],
                                               [o[prepare.OPENRLHF_LABEL_KEY]])
                    self.assertEqual(got["rewards"], [want["score"]])
                    t = layouts["trl"][index]
                    columns = {key: [value] for key, value in t.items() if key != "prompt"}
                    got = trl.route_reward(
                        prompts=[t["prompt"]],
                        completions=[[{"role": "assistant", "content": answer}]],
                        completion_ids=[[1, 2]], trainer_state=None, log_extra=None,
                        log_metric=lambda name, value: logged.append(name), **columns)
                    self.assertEqual(got, [want["score"]])
                    for layout in calls:
                        calls[layout] += 1
        self.assertEqual(set(calls.values()), {142})            # 38 + 37 + 33 + 34 rows
        self.assertGreater(differ, 20)          # the protocol read tells rows apart
        self.assertIn("transitlm/rem", logged)


class LayoutTest(PreparedTestCase):

    def setUp(self):
        PreparedTestCase.setUp(self)
        self.source = os.path.join(REPO, "data", EXAMPLE_FILES["personalized"])
        self.row = example_rows("personalized")[2]

    def expected_row(self):
        return dict({"index_id": self.row["index_id"], "task_id": "personalized",
                     "req_type": self.row["req_type"], "sft_prompt": self.row["sft_prompt"],
                     "sft_label": self.row["sft_label"]}, **bundled_binding(),
                    protocol="reference")

    def messages(self):
        return [{"role": "system", "content": self.row["system_prompt"]},
                {"role": "user", "content": self.row["sft_prompt"]}]

    def test_verl(self):
        line = self.prepared(self.source, "verl", split="test")[2]
        self.assertEqual(line, {
            "data_source": "transitlm/personalized", "prompt": self.messages(),
            "ability": "transit_route_planning",
            "reward_model": {"style": "rule",
                             "ground_truth": json.dumps(self.expected_row(),
                                                        ensure_ascii=False)},
            "extra_info": {"index": 2, "split": "test", "index_id": self.row["index_id"],
                           "task_id": "personalized", "benchmark": "personalized"}})

    def test_openrlhf(self):
        line = self.prepared(self.source, "openrlhf")[2]
        self.assertEqual(line, {"input": self.messages(),
                                "label": json.dumps(self.expected_row(), ensure_ascii=False),
                                "index_id": self.row["index_id"],
                                "datasource": "transitlm/personalized"})

    def test_trl(self):
        line = self.prepared(self.source, "trl")[2]
        self.assertEqual(line, dict({"prompt": self.messages()}, **self.expected_row()))

    def test_the_release_columns_are_kept_and_others_left_out(self):
        source = self.write_csv("rows.csv", (
            "task_id,req_type,adcode,indexid,sft_prompt,sft_label,generate_results\n"
            "benchmark2-train,8,440300,a1,%s,G\n" % cells("personalized")))
        line = self.prepared(source, "trl")[0]
        row = example_rows("personalized")[0]
        self.assertEqual(line, {"prompt": [
            {"role": "system", "content": benchmark_system_prompt("personalized")},
            {"role": "user", "content": row["sft_prompt"]}], "index_id": "a1",
            "task_id": "benchmark2-train", "req_type": "8", "sft_prompt": row["sft_prompt"],
            "sft_label": row["sft_label"], "protocol": "reference", **bundled_binding()})


def arrow_type(value):
    """The type a JSON loader (``datasets``' Arrow schema) gives a value."""
    if isinstance(value, list):
        return ["list", sorted({json.dumps(arrow_type(item)) for item in value})]
    if isinstance(value, dict):
        return {key: arrow_type(item) for key, item in sorted(value.items())}
    return type(value).__name__


class OneDatasetTest(PreparedTestCase):
    """The four benchmarks' files load as one dataset: the same fields, of
    the same types, on every line of every file (a field missing from one
    file, or text in one and a number in another, is datasets' CastError)."""

    def test_trl_and_openrlhf_lines_share_one_schema(self):
        for layout in ("trl", "openrlhf", "verl"):
            schemas = {}
            sources = {}
            for benchmark, name in sorted(EXAMPLE_FILES.items()):
                for line in self.prepared(os.path.join(REPO, "data", name), layout,
                                          **prepared_for(benchmark)):
                    schemas.setdefault(json.dumps(arrow_type(line), sort_keys=True), benchmark)
                    sources.setdefault(line.get("datasource"), set()).add(benchmark)
            self.assertEqual(len(schemas), 1, (layout, schemas))
            if layout == "trl":
                self.assertEqual(sorted(json.loads(list(schemas)[0])), [
                    "index_id", "network_line_info", "network_line_sha256", "network_station_info",
                    "network_station_sha256", "prompt", "protocol", "req_type", "sft_label",
                    "sft_prompt", "task_id"])
            if layout == "openrlhf":
                self.assertEqual(sources, {"transitlm/" + b: {b} for b in EXAMPLE_FILES})


class BrokenRowTest(PreparedTestCase):
    """Every row is judged once with its own label: one nothing can be scored
    against stops prepare with one line naming the row and the field."""

    def test_a_broken_row_exits_2_naming_it(self):
        header = "index_id,task_id,req_type,sft_prompt,sft_label\n"
        good = "a,benchmark2-train,2,%s\n" % cells("personalized")
        row = example_rows("personalized")[1]
        deep = "[" * 150 + "]" * 150
        cases = [("sft_label", [row["sft_prompt"], deep]),
                 ("sft_prompt", ['{"start": %s}' % deep, row["sft_label"]]),
                 ("sft_label", [row["sft_prompt"], "{not json"]),
                 ("sft_label", [row["sft_prompt"], " "]),
                 ("req_type", [row["sft_prompt"], row["sft_label"]])]
        for number, (field, (prompt, label)) in enumerate(cases):
            with self.subTest(field=field, number=number):
                handle = io.StringIO()
                csv.writer(handle, lineterminator="\n").writerow(
                    ["b", "benchmark2-train", "2.5" if field == "req_type" else "5", prompt,
                     label])
                source = self.write_csv("broken%d.csv" % number,
                                        header + good + handle.getvalue())
                out = self.path("out%d.jsonl" % number)
                status, text, err = run_reward(["prepare", "--input", source, "--format",
                                                "trl", "--out", out])
                self.assertEqual((status, text), (2, ""), err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn("row 2 (index_id b): the row's %s" % field, err)
                self.assertFalse(os.path.exists(out))


class BenchmarkOfRowTest(PreparedTestCase):
    """--benchmark, else the row's task_id, else the file's name."""

    HEADER = "index_id,task_id,sft_prompt,sft_label\n"

    def benchmarks(self, name, text, **options):
        return [line["extra_info"]["benchmark"]
                for line in self.prepared(self.write_csv(name, text), "verl", **options)]

    def test_the_order(self):
        rows = self.HEADER + "a,benchmark3-train,%s\nb,,%s\n" % (cells("diversity"),
                                                                  cells("single_route"))
        self.assertEqual(self.benchmarks("benchmark1_rows.csv", rows),
                         ["diversity", "single_route"])
        self.assertEqual(self.benchmarks("rows.csv", self.HEADER + "a,,%s\n"
                                         % cells("general_llm"), benchmark="general_llm"),
                         ["general_llm"])
        lines = self.prepared(self.path("benchmark1_rows.csv"), "verl")
        self.assertEqual([json.loads(line["reward_model"]["ground_truth"])["task_id"]
                          for line in lines], ["benchmark3-train", "single_route"])

    def test_what_is_refused(self):
        cases = [("rows.csv", self.HEADER + "a,,P,L\n", {},
                  "row 1 has no task_id and the file's name names no benchmark"),
                 ("rows.csv", self.HEADER + "a,benchmark3-train,P,L\n",
                  {"benchmark": "single_route"},
                  "row 1: task_id 'benchmark3-train' names diversity, not --benchmark "
                  "single_route"),
                 ("benchmark1.csv", self.HEADER + "a,,%s\nb,bench,P,L\n"
                  % cells("single_route"), {}, "row 2: task_id 'bench' names no benchmark"),
                 ("rows.csv", self.HEADER + "a,benchmark2-test,P,L\n", {},
                  "lacks the req_type column")]
        for name, text, options, words in cases:
            with self.subTest(words):
                source = self.write_csv(name, text)
                with self.assertRaises(prepare.InputError) as ctx:
                    prepare.prepare(source, "verl", self.path("out.jsonl"), **options)
                self.assertIn(words, str(ctx.exception))
                self.assertFalse(os.path.exists(self.path("out.jsonl")))


class SystemPromptTest(PreparedTestCase):

    def test_a_row_without_one_gets_its_benchmarks(self):
        source = self.write_csv("transit-lm-benchmark3-test.csv", (
            "index_id,system_prompt,sft_prompt,sft_label\n"
            "a,,%s\nb,Be brief.,%s\nc, ,%s\n" % tuple(cells("diversity", i) for i in range(3))))
        lines = self.prepared(source, "openrlhf")
        self.assertEqual([line["input"][0]["content"] for line in lines],
                         [benchmark_system_prompt("diversity"), "Be brief.",
                          benchmark_system_prompt("diversity")])
        status, out, err = run_reward(["prepare", "--input", source, "--format", "openrlhf",
                                     "--out", self.path("o.jsonl")])
        self.assertEqual((status, err), (0, ""))
        self.assertIn("2 rows had no system prompt", out)


class CommandTest(PreparedTestCase):
    """reward.py prepare's command line: what it prints, and every input
    problem as exit 2 with one line, nothing written."""

    def test_prints_the_next_steps(self):
        source = os.path.join(REPO, "data", EXAMPLE_FILES["single_route"])
        out = self.path("deep/er/b1.jsonl")
        status, text, err = run_reward(["prepare", "--input", source, "--format", "verl",
                                      "--out", out])
        self.assertEqual((status, err), (0, ""))
        self.assertIn("prepared 38 rows of %s for verl: %s" % (source, out), text)
        self.assertIn(prepare.parquet_command(out), text)
        self.assertIn("reward.custom_reward_function.path=%s"
                      % os.path.join(REPO, "transitlm", "reward", "verl.py"), text)
        status, text, err = run_reward(["prepare", "--input", source, "--format", "openrlhf",
                                      "--out", out])
        self.assertIn("--data.input_key input --data.label_key label", text)

    def test_the_parquet_command_runs_as_printed(self):
        # A stand-in for the datasets package records what the command asks of it.
        stub = self.path("stub")
        os.mkdir(stub)
        with open(os.path.join(stub, "datasets.py"), "w", encoding="utf-8") as handle:
            handle.write("import json, sys\nclass Dataset:\n    @staticmethod\n"
                         "    def from_json(path):\n        return Dataset(path)\n"
                         "    def __init__(self, path):\n        self.path = path\n"
                         "    def to_parquet(self, path):\n"
                         "        print(json.dumps([self.path, path]))\n")
        for out in ("x.jsonl", "it's \"odd\" $HOME `x`.jsonl", "no-suffix"):
            command = shlex.split(prepare.parquet_command(out))
            self.assertEqual(command[:2], ["python", "-c"])
            done = subprocess.run([sys.executable] + command[1:], cwd=stub,
                                  stdout=subprocess.PIPE, universal_newlines=True,
                                  env=dict(os.environ, PYTHONPATH=stub))
            stem = out[:-len(".jsonl")] if out.endswith(".jsonl") else out
            self.assertEqual(json.loads(done.stdout), [out, stem + ".parquet"])

    def test_input_problems_exit_2_with_one_line(self):
        source = os.path.join(REPO, "data", EXAMPLE_FILES["single_route"])
        out = self.path("new/out.jsonl")
        big = "index_id,sft_prompt,sft_label\na,\"%s\",L\n" % ("x" * 2000)
        # A copy: were the check broken, the bundled file would be what is overwritten.
        copy = self.write_csv("copy.csv", "index_id,sft_prompt,sft_label\na,P,L\n")
        cases = [
            (["--input", self.path("missing.csv")], "cannot read input file"),
            (["--input", self.tmp.name], "it is a folder"),
            (["--input", self.write_csv("e.csv", "")], "is empty"),
            (["--input", self.write_csv("h.csv", "index_id,sft_prompt,sft_label\n\n")],
             "has no rows"),
            (["--input", self.write_csv("c.csv", "indexid,sft_prompt\na,P\n")],
             "lacks column(s) sft_label (has: indexid, sft_prompt)"),
            (["--input", self.write_csv("w.csv", "index_id,sft_prompt,sft_label\na,P\n")],
             "row 1 has 2 cell(s) where the header has 3"),
            (["--input", self.write_csv("q.csv", 'index_id,sft_prompt,sft_label\na,"P,L\n')],
             "row 1 has 2 cell(s)"),
            (["--input", self.write_csv("big.csv", big)], "holds more than 1000 characters"),
            (["--input", copy, "--out", copy], "would overwrite --input"),
            (["--input", source, "--out", self.tmp.name], "cannot write"),
            (["--input", source, "--format", "csv"], "invalid choice: 'csv'"),
        ]
        with open(self.path("u.csv"), "wb") as handle:
            handle.write(b"index_id,sft_prompt,sft_label\na,\xff\xfe,L\n")
        cases.append((["--input", self.path("u.csv")], "is not UTF-8 text"))
        limit = csv_rows.MAX_ROW_CHARS
        self.addCleanup(setattr, csv_rows, "MAX_ROW_CHARS", limit)
        for args, words in cases:
            with self.subTest(args=args[-1]):
                argv = ["prepare", "--format", "verl", "--out", out] + args
                csv_rows.MAX_ROW_CHARS = 1000 if "big.csv" in args[-1] else limit
                status, text, err = run_reward(argv)
                self.assertEqual(status, 2, err)
                self.assertEqual(text, "")
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn(words, err)
                self.assertFalse(os.path.exists(os.path.dirname(out)))   # nothing left
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         sorted(["e.csv", "h.csv", "c.csv", "w.csv", "q.csv", "big.csv",
                                 "u.csv", "copy.csv"]))
        with open(copy, encoding="utf-8") as handle:
            self.assertEqual(handle.read(), "index_id,sft_prompt,sft_label\na,P,L\n")

    def test_as_a_program(self):
        source = os.path.join(REPO, "data", EXAMPLE_FILES["general_llm"])
        done = subprocess.run([sys.executable, SCRIPT, "prepare", "--input", source,
                               "--format", "trl", "--out", "g.jsonl", "--protocol", "paper"],
                              cwd=self.tmp.name,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, encoding="utf-8")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("prepared 34 rows", done.stdout)
        self.assertEqual(len(read_lines(self.path("g.jsonl"))), 34)
        done = subprocess.run([sys.executable, SCRIPT, "--version"], stdout=subprocess.PIPE,
                              universal_newlines=True)
        self.assertTrue(done.stdout.startswith("transitlm "), done.stdout)


if __name__ == "__main__":
    unittest.main()

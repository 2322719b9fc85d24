"""transitlm/reward/row_protocol.py: a row is scored under the protocol
``reward.py prepare`` recorded in it.

- prepare writes ``protocol`` into every row of every layout;
- each adapter, called as its trainer calls it, and the service score each
  row under its own protocol (a batch mixing the general LLM under paper and
  the other benchmarks under reference included);
- a configured protocol (a keyword, the service's --protocol,
  $TRANSITLM_REWARD_PROTOCOL) wins, and a row prepared for another is said
  once in the log per process and pair, not per row;
- rows without a protocol score as before (reference);
- prepare refuses a file whose labels of one benchmark pass every check
  under the default protocol less than 90 % of the time, naming the share
  and the protocol under which they pass; --protocol and
  --allow_failing_labels proceed.

The rows the two protocols judge apart, with their own label as the
answer (docs/reward.md): six general-LLM labels (reference's count quirk),
benchmark 2's req_type 0 row (pc 1.0 under reference, not counted under
paper) and benchmark 3's rows 7 and 13 (rd 0.889 against 0.667: paper counts
an empty access mode as 步行).
"""

import contextlib
import csv
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from tests.support import REPO
from tests.support.services import (EXAMPLE_FILES, ServerTestCase, chatml, example_rows,
                                    read_lines, run_reward)
from transitlm.reward import openrlhf, prepare, row_protocol, service, trl, verl  # noqa: E402
from transitlm.reward.scoring import RowDataError, score  # noqa: E402

ENV = "TRANSITLM_REWARD_PROTOCOL"
SCRIPT = os.path.join(REPO, "reward.py")
# Bundled rows whose own label the two protocols judge apart.
DIFFERENT = {"general_llm": (10, 11, 14, 17, 18, 21), "personalized": (35,),
             "diversity": (7, 13)}
PROTOCOLS = ("reference", "paper")


def source(benchmark):
    return os.path.join(REPO, "data", EXAMPLE_FILES[benchmark])


@contextlib.contextmanager
def no_protocol_set():
    """The environment without $TRANSITLM_REWARD_PROTOCOL, and a process that
    has said nothing yet of a protocol (row_protocol notes a pair once)."""
    with mock.patch.dict(os.environ), mock.patch.object(row_protocol, "_NOTED", set()):
        os.environ.pop(ENV, None)
        yield


@contextlib.contextmanager
def notes():
    """The lines logged by transitlm.reward while inside (a list)."""
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = Collect(logging.WARNING)
    row_protocol.LOG.addHandler(handler)
    try:
        yield lines
    finally:
        row_protocol.LOG.removeHandler(handler)


class Prepared(object):
    """Every bundled file prepared once per layout and protocol (the general
    LLM's under reference too: --protocol reference), kept for the run."""

    _lines = None

    @classmethod
    def lines(cls, benchmark, protocol, layout):
        if cls._lines is None:
            folder = tempfile.mkdtemp(prefix="row-protocol-")
            try:
                found = {}
                for name in EXAMPLE_FILES:
                    for chosen in PROTOCOLS:
                        for form in prepare.FORMATS:
                            out = os.path.join(folder, "%s.%s.%s.jsonl" % (name, chosen, form))
                            prepare.prepare(source(name), form, out, protocol=chosen)
                            found[name, chosen, form] = read_lines(out)
            finally:
                shutil.rmtree(folder)
            cls._lines = found
        return cls._lines[benchmark, protocol, layout]


def prepared_row(line, layout):
    """The release row a prepared line carries."""
    if layout == "trl":
        return {key: value for key, value in line.items() if key != "prompt"}
    return json.loads(line["reward_model"]["ground_truth"] if layout == "verl"
                      else line["label"])


# ---------------------------------------------------------------------------
# Each adapter called as its trainer calls it -> one score per completion
# ---------------------------------------------------------------------------

def by_trl(lines, completions, **settings):
    function = trl.make_reward("route_reward_test", **settings) if settings \
        else trl.route_reward
    columns = {key: [line[key] for line in lines] for key in lines[0] if key != "prompt"}
    return function(prompts=[line["prompt"] for line in lines],
                    completions=[[{"role": "assistant", "content": text}]
                                 for text in completions],
                    completion_ids=[[1]] * len(lines), trainer_state=None, log_extra=None,
                    log_metric=None, **columns)


def by_verl(lines, completions, **reward_kwargs):
    return [verl.compute_score(data_source=line["data_source"], solution_str=text,
                               ground_truth=line["reward_model"]["ground_truth"],
                               extra_info=dict(line["extra_info"], num_turns=None),
                               **reward_kwargs)["score"]
            for line, text in zip(lines, completions)]


def openrlhf_body(lines, completions):
    prompts = [chatml(line["input"]) for line in lines]
    return {"query": [prompt + text + "<|im_end|>" for prompt, text in zip(prompts, completions)],
            "prompts": prompts, "labels": [line["label"] for line in lines]}


def by_openrlhf(lines, completions):
    body = openrlhf_body(lines, completions)
    return openrlhf.reward_func(body["query"], body["prompts"], body["labels"])["rewards"]


def own_labels(lines, layout):
    return [prepared_row(line, layout)["sft_label"] for line in lines]


def expected(benchmark, protocol):
    """The scores of the bundled rows' own labels under ``protocol``."""
    return [score(row["sft_label"], row, benchmark, protocol=protocol)["score"]
            for row in example_rows(benchmark)]


class PrepareRecordsTest(unittest.TestCase):

    def test_every_layout_carries_the_protocol(self):
        for benchmark in EXAMPLE_FILES:
            for protocol in PROTOCOLS:
                for layout in prepare.FORMATS:
                    with self.subTest(benchmark=benchmark, protocol=protocol, layout=layout):
                        rows = [prepared_row(line, layout)
                                for line in Prepared.lines(benchmark, protocol, layout)]
                        self.assertEqual({row[row_protocol.KEY] for row in rows}, {protocol})

    def test_the_default_is_written_too(self):
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "b1.jsonl")
            prepare.prepare(source("single_route"), "trl", out)
            self.assertEqual({line["protocol"] for line in read_lines(out)}, {"reference"})


class OwnProtocolTest(unittest.TestCase):
    """Nothing configured: every adapter scores a row under its own protocol."""

    def test_each_adapter_honours_the_rows_protocol(self):
        with no_protocol_set(), notes() as said:
            for benchmark in DIFFERENT:
                scores = {protocol: expected(benchmark, protocol) for protocol in PROTOCOLS}
                # The protocols judge these rows apart, and only these.
                apart = [index for index, (a, b) in enumerate(zip(scores["reference"],
                                                                   scores["paper"])) if a != b]
                self.assertEqual(tuple(apart), DIFFERENT[benchmark])
                for protocol in PROTOCOLS:
                    for layout, adapter in (("trl", by_trl), ("verl", by_verl),
                                            ("openrlhf", by_openrlhf)):
                        with self.subTest(benchmark=benchmark, protocol=protocol,
                                          layout=layout):
                            lines = Prepared.lines(benchmark, protocol, layout)
                            self.assertEqual(adapter(lines, own_labels(lines, layout)),
                                             scores[protocol])
        self.assertEqual(said, [])
        # The general LLM's labels: all at the top under paper; under
        # reference six earn only their format, as JSON with no route does.
        self.assertEqual(expected("general_llm", "paper"), [1.0] * 34)
        self.assertEqual(sorted(expected("general_llm", "reference")), [0.125] * 6 + [1.0] * 28)

    def test_one_batch_mixes_the_general_llm_under_paper_and_the_others_under_reference(self):
        # The docs' TRL recipe: the four files as one dataset.
        with no_protocol_set():
            lines, want = [], []
            for benchmark in ("general_llm", "single_route", "personalized", "diversity"):
                protocol = "paper" if benchmark == "general_llm" else "reference"
                lines += Prepared.lines(benchmark, protocol, "trl")
                want += expected(benchmark, protocol)
            got = by_trl(lines, own_labels(lines, "trl"))
        self.assertEqual(got, want)
        self.assertEqual(got[:34], [1.0] * 34)      # the general LLM's, under paper


class RewardServiceTestCase(ServerTestCase):
    SETTINGS = {}

    def make_server(self):
        with no_protocol_set():
            self.options = service.checked_settings(**self.SETTINGS)
        return service.make_server(self.options, "127.0.0.1", 0, log=self.log.append)

    def post(self, lines, completions):
        status, _, payload = self.request("POST", service.REWARD_PATH,
                                          openrlhf_body(lines, completions))
        self.assertEqual(status, 200, payload)
        return payload["rewards"]


class ServiceOwnProtocolTest(RewardServiceTestCase):

    def test_each_row_under_its_own_protocol_in_one_request(self):
        lines, want = [], []
        for protocol in PROTOCOLS:
            for benchmark in DIFFERENT:
                lines += Prepared.lines(benchmark, protocol, "openrlhf")
                want += expected(benchmark, protocol)
        with no_protocol_set(), notes() as said:
            self.assertEqual(self.post(lines, own_labels(lines, "openrlhf")), want)
        self.assertEqual(said, [])
        health = self.request("GET", "/healthz")[2]
        self.assertIsNone(health["protocol"])           # none configured: each row's

    def test_a_row_naming_no_protocol_is_a_422(self):
        lines = [dict(line, label=json.dumps(dict(json.loads(line["label"]), protocol="PAPER")))
                 for line in Prepared.lines("single_route", "paper", "openrlhf")[:2]]
        with no_protocol_set():
            status, _, payload = self.request("POST", service.REWARD_PATH,
                                              openrlhf_body(lines, ["{}", "{}"]))
        self.assertEqual(status, 422, payload)
        self.assertEqual(payload["error"], "labels[0]: the row's protocol 'PAPER' names no "
                                           "protocol (paper, reference)")


class ConfiguredProtocolTest(unittest.TestCase):
    """A protocol set in the trainer's configuration wins over the row's; a
    difference is said once per process and pair."""

    NOTE = ("rows prepared for the %s protocol are scored under %s, the protocol "
            "configured")

    def test_keywords_win_and_say_it_once(self):
        paper_rows = Prepared.lines("general_llm", "paper", "trl")
        reference_rows = Prepared.lines("general_llm", "reference", "verl")
        with no_protocol_set(), notes() as said:
            for _ in range(2):
                self.assertEqual(by_trl(paper_rows, own_labels(paper_rows, "trl"),
                                        protocol="reference"),
                                 expected("general_llm", "reference"))
            self.assertEqual(len(said), 1, said)
            self.assertIn(self.NOTE % ("paper", "reference"), said[0])
            for _ in range(2):
                self.assertEqual(by_verl(reference_rows, own_labels(reference_rows, "verl"),
                                         protocol="paper"),
                                 expected("general_llm", "paper"))
            self.assertEqual(len(said), 2, said)
            self.assertIn(self.NOTE % ("reference", "paper"), said[1])
            # the same protocol as the row's: nothing to say
            by_verl(reference_rows, own_labels(reference_rows, "verl"), protocol="reference")
            self.assertEqual(len(said), 2, said)

    def test_the_environment_is_a_configuration(self):
        lines = Prepared.lines("diversity", "paper", "openrlhf")
        with no_protocol_set(), notes() as said:
            os.environ[ENV] = "reference"
            self.assertEqual(by_openrlhf(lines, own_labels(lines, "openrlhf")),
                             expected("diversity", "reference"))
            self.assertEqual(by_openrlhf(lines, own_labels(lines, "openrlhf")),
                             expected("diversity", "reference"))
        self.assertEqual(len(said), 1, said)
        self.assertIn(self.NOTE % ("paper", "reference"), said[0])

    def test_the_log_line_reaches_stderr_without_logging_set_up(self):
        # Python's last-resort handler: one line on stderr, as the service logs.
        code = ("import sys; sys.path.insert(0, %r)\n"
                "from transitlm.reward import row_protocol\n"
                "for _ in range(3):\n"
                "    row_protocol.chosen({'protocol': 'paper'}, 'reference')\n" % REPO)
        done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True,
                              encoding="utf-8")
        self.assertEqual((done.returncode, done.stdout), (0, ""), done.stderr)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertIn(self.NOTE % ("paper", "reference"), done.stderr)


class ServiceConfiguredTest(RewardServiceTestCase):
    SETTINGS = {"protocol": "paper"}

    def test_the_flag_wins_and_is_said_once(self):
        lines = Prepared.lines("personalized", "reference", "openrlhf")
        with no_protocol_set(), notes() as said:
            for _ in range(3):
                self.assertEqual(self.post(lines, own_labels(lines, "openrlhf")),
                                 expected("personalized", "paper"))
        self.assertEqual(len(said), 1, said)
        self.assertIn("rows prepared for the reference protocol are scored under paper",
                      said[0])
        self.assertEqual(self.request("GET", "/healthz")[2]["protocol"], "paper")


class WithoutProtocolTest(unittest.TestCase):
    """Rows prepared by an earlier version, and release rows: reference, as
    before, in every adapter; a protocol cell that is empty is none."""

    def test_rows_without_one_score_under_reference(self):
        with no_protocol_set(), notes() as said:
            for benchmark in DIFFERENT:
                want = expected(benchmark, "reference")
                # A trainer's missing cells reach TRL's columns (None, NaN);
                # the JSON rows of verl and OpenRLHF hold text.
                for layout, adapter, cells in (
                        ("trl", by_trl, ("drop", "", None, float("nan"))),
                        ("verl", by_verl, ("drop", " ")), ("openrlhf", by_openrlhf, ("",))):
                    for cell in cells:
                        lines = [self.without(line, layout, cell)
                                 for line in Prepared.lines(benchmark, "paper", layout)]
                        with self.subTest(benchmark=benchmark, layout=layout, cell=cell):
                            self.assertEqual(adapter(lines, own_labels(lines, layout)), want)
                rows = example_rows(benchmark)          # the release's CSV rows
                self.assertEqual([score(row["sft_label"], row, benchmark)["score"]
                                  for row in rows], want)
        self.assertEqual(said, [])

    @staticmethod
    def without(line, layout, cell):
        """A prepared line whose row has no protocol (``drop``) or ``cell``."""
        row = prepared_row(line, layout)
        if cell == "drop":
            del row["protocol"]
        else:
            row["protocol"] = cell
        if layout == "trl":
            return dict(row, prompt=line["prompt"])
        text = json.dumps(row, ensure_ascii=False)
        if layout == "verl":
            return dict(line, reward_model=dict(line["reward_model"], ground_truth=text))
        return dict(line, label=text)

    def test_a_row_naming_no_protocol_is_refused_unless_one_is_configured(self):
        row = dict(prepared_row(Prepared.lines("single_route", "reference", "trl")[0], "trl"),
                   protocol="papers")
        with no_protocol_set(), notes() as said:
            with self.assertRaises(RowDataError) as caught:
                score(row["sft_label"], row)
            self.assertIn("the row's protocol 'papers' names no protocol (paper, reference)",
                          str(caught.exception))
            self.assertEqual(score(row["sft_label"], row, protocol="reference")["score"], 1.0)
        self.assertEqual(len(said), 1)
        self.assertIn("rows prepared for the 'papers' protocol are scored under reference",
                      said[0])


class RefusalTest(unittest.TestCase):
    """prepare: fewer than 90 % of a benchmark's labels passing under the
    default protocol is refused with one line; --protocol and
    --allow_failing_labels proceed."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.runs = 0

    def run_prepare(self, path, *args):
        self.runs += 1          # a folder of its own each time
        self.out = os.path.join(self.tmp.name, "out%d" % self.runs, "rows.jsonl")
        return run_reward(["prepare", "--input", path, "--format", "trl", "--out", self.out]
                          + list(args))

    def assertRefused(self, result, *words):
        status, out, err = result
        self.assertEqual((status, out), (2, ""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        for word in words:
            self.assertIn(word, err)
        self.assertFalse(os.path.exists(os.path.dirname(self.out)))

    def test_the_general_llm_under_reference(self):
        self.assertRefused(
            self.run_prepare(source("general_llm")),
            "error: input file %s: 28 of 34 (82 %%) general_llm labels pass every check under "
            "the reference protocol, fewer than 90 %%; under paper 34 of 34 (100 %%) pass: give "
            "--protocol paper (or --protocol reference, or --allow_failing_labels, to prepare "
            "them under reference anyway)" % source("general_llm"))

    def test_the_ways_through(self):
        for args, protocol, warned in ((["--protocol", "paper"], "paper", False),
                                       (["--protocol", "reference"], "reference", True),
                                       (["--allow_failing_labels"], "reference", True)):
            with self.subTest(args=args):
                status, out, err = self.run_prepare(source("general_llm"), *args)
                self.assertEqual((status, err), (0, ""))
                self.assertEqual({row["protocol"] for row in read_lines(self.out)}, {protocol})
                warning = ("WARNING: 28 of 34 (82 %) general_llm labels pass every check under "
                           "the reference protocol, fewer than 90 %; under paper 34 of 34 "
                           "(100 %)")
                self.assertEqual(warning in out, warned, out)
                self.assertIn("every row is to be scored under the %s protocol" % protocol, out)

    def write(self, name, rows):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["index_id", "task_id", "sft_prompt", "sft_label"])
            writer.writerows(rows)
        return path

    def test_each_benchmark_of_a_file_counts_apart(self):
        # 66 of 72 labels pass (92 %), but 28 of 34 of the general LLM's.
        rows = [[row["index_id"], task, row["sft_prompt"], row["sft_label"]]
                for task, benchmark in (("benchmark1-train", "single_route"),
                                        ("general-train", "general_llm"))
                for row in example_rows(benchmark)]
        self.assertRefused(self.run_prepare(self.write("mixed.csv", rows)),
                           "28 of 34 (82 %) general_llm labels", "give --protocol paper")
        status, out, err = self.run_prepare(self.write("mixed.csv", rows), "--protocol",
                                            "paper")
        self.assertEqual(status, 0, err)
        self.assertIn("72 of 72 labels pass every check of their benchmark under the paper "
                      "protocol", out)

    def test_labels_failing_under_every_protocol_and_the_boundary(self):
        # A label moved to the next row's prompt starts far from its origin.
        rows = example_rows("single_route")
        good = [[row["index_id"], "", row["sft_prompt"], row["sft_label"]] for row in rows]
        moved = [[a["index_id"], "", a["sft_prompt"], b["sft_label"]]
                 for a, b in zip(rows, rows[1:])]
        path = self.write("benchmark1_moved.csv", moved[:10])
        self.assertRefused(
            self.run_prepare(path),
            "0 of 10 (0 %) single_route labels pass every check under the reference protocol, "
            "fewer than 90 %; under paper 0 of 10 (0 %): is the station file the one the file "
            "was built on? (--allow_failing_labels, or --protocol reference, prepares them "
            "anyway)")
        self.assertEqual(self.run_prepare(path, "--allow_failing_labels")[0], 0)
        # 9 of 10 is 90 %: prepared; 8 of 9 is not.
        self.assertEqual(self.run_prepare(self.write("benchmark1_a.csv",
                                                     good[:9] + moved[:1]))[0], 0)
        self.assertRefused(self.run_prepare(self.write("benchmark1_b.csv",
                                                       good[:8] + moved[:1])),
                           "8 of 9 (88 %) single_route labels")

    def test_the_bundled_files_of_benchmarks_1_to_3_pass_under_the_default(self):
        for benchmark in ("single_route", "personalized", "diversity"):
            with self.subTest(benchmark=benchmark):
                status, out, err = self.run_prepare(source(benchmark))
                self.assertEqual((status, err), (0, ""))
                self.assertNotIn("WARNING", out)


if __name__ == "__main__":
    unittest.main()

"""The TransitLM tasks in the real lm-evaluation-harness: its own command runs
the group on the bundled examples against the stand-in chat server, and its
results JSON holds the evaluator's figures (report.json's ``metrics`` on the
same answers) to the last digit; the requests carry the release's prompt and
the generation settings; the samples log carries each row's record; the
task's metadata (in the results' configs) carries the evaluator's signature;
and ``harness.py import`` of the harness's output gives the evaluator's
report of the same answers, holding the harness's figures.

The harness lives in a virtual environment outside the repository, named by
$TRANSITLM_LM_EVAL_VENV (``.ci/run`` makes one with lm-eval[api] and exports
it).  Without it the test skips with one line, except under CI=true, where it
fails.  One group run: the harness's start (it indexes its ~14,000 built-in
task files) is most of its cost."""

import atexit
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.support import REPO
from tests.support.services import StandIn, answers_from
from tests.support.chromium import in_ci
from tests.support.evaluator_rows import evaluate_to_files, run_in_process
from tests.support.lane import Background, suite_environment
from transitlm.evaluation.catalog import (BENCHMARK_NAMES, DATA_DIR, benchmark_info,  # noqa: E402
                               benchmark_metrics, load_benchmark)
from transitlm.generate.runner import input_prompts  # noqa: E402
from transitlm.harness.cli import main as harness_main  # noqa: E402
from transitlm.harness.lm_eval_scoring import DRAWINGS  # noqa: E402
from transitlm.harness.lm_eval_tasks import (  # noqa: E402
    GROUP, MAX_GEN_TOKS, TASKS, write_task_folder)

VENV_ENV = "TRANSITLM_LM_EVAL_VENV"
MODEL = "stand-in-model"
BUNDLED = [(name, os.path.join(DATA_DIR, benchmark_info(name).default_input))
           for name in BENCHMARK_NAMES]


def lm_eval_program():
    """The lm_eval command of $TRANSITLM_LM_EVAL_VENV, or None."""
    venv = os.environ.get(VENV_ENV)
    program = os.path.join(venv, "bin", "lm_eval") if venv else None
    return program if program and os.access(program, os.X_OK) else None


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def run_the_group(program):
    """The harness's own command on the bundled examples against the stand-in
    -> (folder, answers, requests, results, samples); its folder is removed at
    exit (the run starts as this module is loaded: see HARNESS_RUN)."""
    tmp = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, tmp, True)
    tasks = os.path.join(tmp, "tasks")
    write_task_folder(tasks, BUNDLED)
    answers = {}
    for _, path in BUNDLED:
        file_answers = answers_from(path)
        assert not set(file_answers) & set(answers), "a prompt in two files"
        answers.update(file_answers)
    server = StandIn(lambda user, nth: ("ok", answers[user]))
    try:
        env = suite_environment(HF_DATASETS_CACHE=os.path.join(tmp, "hf"), HF_HUB_OFFLINE="1",
                                HF_DATASETS_OFFLINE="1", TRANSITLM_CACHE_DIR="off")
        env.pop("OPENAI_API_KEY", None)
        # The harness's own command, as docs/harness.md shows it.
        done = subprocess.run(
            [program, "--model", "local-chat-completions", "--model_args",
             "base_url=%s/chat/completions,model=%s" % (server.url, MODEL),
             "--tasks", GROUP, "--include_path", tasks, "--apply_chat_template",
             "--output_path", os.path.join(tmp, "out"), "--log_samples"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=600)
    finally:
        server.close()
    requests = [body for _, _, body in server.requests]
    # Run from the repository root, as the docs show it: no warning that "a
    # local directory named 'transitlm' exists" (the group is transitlm_all).
    assert "A local directory named" not in done.stderr, done.stderr[-2000:]
    if done.returncode != 0:
        raise AssertionError("lm_eval exit status %d: %s"
                             % (done.returncode, done.stderr[-3000:]))
    folder = os.path.join(tmp, "out", MODEL)
    with open(glob.glob(os.path.join(folder, "results_*.json"))[0], encoding="utf-8") as h:
        results = json.load(h)
    samples = {name: read_jsonl(glob.glob(os.path.join(
        folder, "samples_%s_*.jsonl" % TASKS[name]))[0]) for name in BENCHMARK_NAMES}
    return tmp, answers, requests, results, samples


# The harness starts slowly (it indexes its ~14,000 built-in task files): its
# run starts as this module is loaded and goes on beside the other tests (a
# process of its own, on the machine's other core); the tests wait for it.
PROGRAM = lm_eval_program()
HARNESS_RUN = Background(lambda: run_the_group(PROGRAM)) if PROGRAM else None


class HarnessRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if HARNESS_RUN is None:
            message = ("lm-evaluation-harness not found: set %s to a virtual environment "
                       "with lm-eval[api] (.ci/run makes one)" % VENV_ENV)
            if in_ci():
                raise AssertionError(message + "; CI is set, so the harness test must run")
            raise unittest.SkipTest(message)
        cls.tmp, cls.answers, cls.requests, cls.results, cls.samples = HARNESS_RUN.result()
        # harness.py import of the harness's own output (its --output_path).
        cls.imported = os.path.join(cls.tmp, "imported")
        cls.import_run = run_in_process(harness_main, ["import", os.path.join(cls.tmp, "out"),
                                                       "--out", cls.imported])

    def test_the_results_hold_the_evaluators_figures_on_the_same_answers(self):
        for benchmark, path in BUNDLED:
            samples = sorted(self.samples[benchmark], key=lambda sample: sample["doc_id"])
            with tempfile.TemporaryDirectory() as tmp:
                # The answers the harness got, as a predictions file.
                predictions = os.path.join(tmp, "answers.jsonl")
                with open(predictions, "w", encoding="utf-8") as handle:
                    for sample in samples:
                        self.assertEqual(sample["resps"], [[self.answers[
                            sample["doc"]["sft_prompt"]]]])
                        handle.write(json.dumps({"index_id": sample["doc"]["index_id"],
                                                 "generate_results": sample["resps"][0][0]},
                                                ensure_ascii=False) + "\n")
                # ... and the prompt they were asked, as generate.py records it.
                with open(predictions + ".settings.json", "w", encoding="utf-8") as handle:
                    json.dump({"prompt": input_prompts(path, benchmark).record()}, handle)
                report, details, _ = evaluate_to_files(
                    load_benchmark(benchmark), ["--input", path, "--predictions", predictions,
                                                "--quiet"], tmp)
            got = self.results["results"][TASKS[benchmark]]
            self.assertEqual(got["sample_len"], report["counts"]["samples"])
            self.assertEqual({metric.key: got[metric.key + ",none"]
                              for metric in benchmark_metrics(benchmark)},
                             report["metrics"], benchmark)
            self.assertEqual([sample["conn"] for sample in samples],
                             [{key: value for key, value in line.items()
                               if key not in DRAWINGS} for line in details], benchmark)
            # The task's metadata, which the harness copies into its configs,
            # carries the signature the evaluator prints for these answers.
            self.assertEqual(self.results["configs"][TASKS[benchmark]]["metadata"]["signature"],
                             report["signature"])
            # harness.py import: the evaluator's report of the same answers,
            # holding the harness's figures.
            with open(os.path.join(self.imported, TASKS[benchmark], "report.json"),
                      encoding="utf-8") as handle:
                imported = json.load(handle)
            self.assertEqual({metric.key: got[metric.key + ",none"]
                              for metric in benchmark_metrics(benchmark)}, imported["metrics"])
            for one in (imported, report):
                del one["inputs"]["predictions"]
            self.assertEqual(imported, report, benchmark)

    def test_the_import_of_the_harness_output(self):
        status, stdout, stderr = self.import_run
        self.assertEqual((status, stderr), (0, ""))
        self.assertIn("(model %s, lm_eval 0.4.13)" % MODEL, stdout)
        for benchmark in BENCHMARK_NAMES:
            with open(os.path.join(self.imported, TASKS[benchmark], "run.json"),
                      encoding="utf-8") as handle:
                generation = json.load(handle)["generation"]
            self.assertEqual((generation["model"], generation["model_type"],
                              generation["generation_kwargs"]["max_gen_toks"],
                              generation["rows"]["scored"]),
                             (MODEL, "local-chat-completions", MAX_GEN_TOKS,
                              len(self.samples[benchmark])))
            self.assertEqual(generation["model_args"]["model"], MODEL)

    def test_each_request_carries_the_rows_prompt_and_the_generation_settings(self):
        rows = {}
        for benchmark in BENCHMARK_NAMES:
            for sample in self.samples[benchmark]:
                rows[sample["doc"]["sft_prompt"]] = sample["doc"]
        self.assertEqual(len(self.requests), sum(len(s) for s in self.samples.values()))
        for body in self.requests:
            doc = rows[body["messages"][-1]["content"]]
            self.assertEqual(body["messages"], [
                {"role": "system", "content": doc["system_prompt"]},
                {"role": "user", "content": doc["sft_prompt"]}])
            self.assertEqual((body["model"], body["max_tokens"], body["temperature"],
                              body["stop"]), (MODEL, MAX_GEN_TOKS, 0.0, []))

    def test_the_group_and_the_samples_log(self):
        self.assertEqual(self.results["group_subtasks"],
                         {GROUP: [TASKS[name] for name in BENCHMARK_NAMES]})
        self.assertEqual(self.results["higher_is_better"]["transitlm_single_route"]["mape"],
                         False)
        for benchmark in BENCHMARK_NAMES:
            keys = [metric.key for metric in benchmark_metrics(benchmark)]
            for sample in self.samples[benchmark]:
                self.assertEqual(sample["metrics"], keys)
                self.assertEqual(sample["conn"]["row"], sample["doc_id"] + 1)
                self.assertIn("failure_codes", sample["conn"])
                for key in keys[1:]:
                    self.assertEqual(len(sample[key]), 2, key)


if __name__ == "__main__":
    unittest.main()

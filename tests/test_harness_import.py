"""harness.py import (transitlm/harness/lm_eval_import.py, lm_eval_output.py):
an lm-evaluation-harness run -- here written in the harness's layout by
tests/support/harness_runs.py; tests/test_harness_lm_eval_run.py imports a
real one -- becomes one run folder per TransitLM task, byte for byte what
evaluate.py --predictions writes for the same answers, with the harness's
own figures; a --limit run, foreign tasks, the three ways to name the run;
every problem refused with one line before anything is written; and
compare.py over imported runs and an evaluator run."""

import hashlib
import json
import os
import shutil
import tempfile
import unittest

from tests.support.services import answers_from
from tests.support.evaluator_rows import run_evaluator, run_in_process, write_samples
from tests.support.synthetic_runs import run_compare
from tests.support.services import read_csv
from tests.support.harness_runs import harness_output
from common import InputError  # noqa: E402
from transitlm.evaluation.catalog import BENCHMARK_NAMES, DATA_DIR, benchmark_info, load_benchmark
from transitlm.harness.lm_eval_tasks import TASKS, write_task_folder
from transitlm.evaluation.prompt_texts import benchmark_system_prompt

BUNDLED = [(name, os.path.join(DATA_DIR, benchmark_info(name).default_input))
           for name in BENCHMARK_NAMES]
RUN_FILES = ("report.json", "details.jsonl", "report.txt", "report.html")


def harness(*argv):
    from transitlm.harness.cli import main
    return run_in_process(main, list(argv))


def read(path, mode="r"):
    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
        return handle.read()


def all_answers():
    answers = {}
    for _, path in BUNDLED:
        answers.update(answers_from(path))
    return answers


class ImportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.tasks = os.path.join(cls.tmp, "tasks")
        write_task_folder(cls.tasks, BUNDLED)
        cls.answers = all_answers()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def setUp(self):
        self.work = tempfile.mkdtemp(dir=self.tmp)

    def output(self, name="out", **options):
        out = os.path.join(self.work, name)
        folder = harness_output(out, self.tasks,
                                lambda benchmark, doc: self.answers[doc["sft_prompt"]], **options)
        return out, folder

    def test_each_task_becomes_the_run_folder_evaluate_py_writes_for_the_same_answers(self):
        out, folder = self.output()
        imported = os.path.join(self.work, "imported")
        status, stdout, stderr = harness("import", out, "--out", imported)
        self.assertEqual((status, stderr), (0, ""))
        lines = stdout.splitlines()
        self.assertIn("(model org/model-a, lm_eval 0.4.13)", lines[0])
        self.assertEqual([line.split()[0] for line in lines[1:5]],
                         [TASKS[name] for name in BENCHMARK_NAMES])
        self.assertIn("38 of 38 rows", lines[1])
        self.assertTrue(lines[-1].startswith("Compare them: python3 compare.py "))
        results = json.loads(read([os.path.join(folder, name) for name in os.listdir(folder)
                                   if name.startswith("results_")][0]))
        for benchmark, path in BUNDLED:
            run = os.path.join(imported, TASKS[benchmark])
            self.assertEqual(sorted(os.listdir(run)), sorted(RUN_FILES + (
                "run.json", "predictions.jsonl", "predictions.jsonl.settings.json")))
            # evaluate.py --predictions on the same answers: the same files, byte for byte.
            again = os.path.join(self.work, "again-" + benchmark)
            status, _, stderr = run_evaluator(load_benchmark(benchmark), [
                "--input", path, "--predictions", os.path.join(run, "predictions.jsonl"),
                "--out", again])
            self.assertEqual(status, 0, stderr)
            for name in RUN_FILES:
                self.assertEqual(read(os.path.join(again, name), "rb"),
                                 read(os.path.join(run, name), "rb"), (benchmark, name))
            # ... and the harness's own figures, to the last digit.
            report = json.loads(read(os.path.join(run, "report.json")))
            entry = results["results"][TASKS[benchmark]]
            self.assertEqual({key: entry[key + ",none"] for key in report["metrics"]},
                             report["metrics"])
            self.assertEqual(report["counts"]["samples"], entry["sample_len"])
            # The task's metadata (the harness's configs) carries the evaluator's signature.
            self.assertEqual(results["configs"][TASKS[benchmark]]["metadata"]["signature"],
                             report["signature"])
            generation = json.loads(read(os.path.join(run, "run.json")))["generation"]
            self.assertEqual(generation["harness_figures"], report["metrics"])
            self.assertEqual((generation["model"], generation["model_type"],
                              generation["lm_eval_version"], generation["git_hash"],
                              generation["task"], generation["task_folder"]),
                             ("org/model-a", "local-chat-completions", "0.4.13", "0123abc",
                              TASKS[benchmark], self.tasks))
            self.assertEqual(generation["generation_kwargs"]["max_gen_toks"], 16384)
            self.assertEqual(generation["rows"], {"scored": report["counts"]["samples"],
                                                  "in_file": report["counts"]["samples"]})
            # The prompt: the rows' own system_prompt cells, one text for all.
            self.assertEqual(generation["prompt"], {
                "source": "column", "sha256": hashlib.sha256(read_csv(path)[0][
                    "system_prompt"].encode("utf-8")).hexdigest()})
            # The sidecar beside the answers: evaluate.py's run.json records the same.
            self.assertEqual(json.loads(read(os.path.join(again, "run.json")))["generation"],
                             generation)
            self.assertNotIn("sample_count:", report["signature"])

    def test_a_file_without_system_prompts_records_the_default_prompt(self):
        rows = read_csv(BUNDLED[0][1])
        path = os.path.join(self.work, "b1 without prompts.csv")
        write_samples(path, rows, columns=("index_id", "sft_prompt", "sft_label"))
        tasks = os.path.join(self.work, "tasks")
        write_task_folder(tasks, [("single_route", path)])
        out = os.path.join(self.work, "out")
        harness_output(out, tasks, lambda benchmark, doc: self.answers[doc["sft_prompt"]])
        imported = os.path.join(self.work, "imported")
        status, _, stderr = harness("import", out, "--out", imported)
        self.assertEqual((status, stderr), (0, ""))
        generation = json.loads(read(os.path.join(imported, "transitlm_single_route",
                                                  "run.json")))["generation"]
        self.assertEqual(generation["prompt"], {"source": "default", "sha256": hashlib.sha256(
            benchmark_system_prompt("single_route").encode("utf-8")).hexdigest()})

    def test_another_benchmarks_file_is_refused_at_writing_and_allowed_at_import(self):
        # A benchmark-3 file given as benchmark 1's (issue 46): refused when
        # the tasks are written; written with --allow_other_benchmark, the
        # import scores it the same way and its run says so.
        b3 = BUNDLED[2][1]
        tasks = os.path.join(self.work, "tasks")
        with self.assertRaisesRegex(InputError, "looks like a benchmark-3 file .* use "
                                                "--benchmark diversity, or give "
                                                "--allow_other_benchmark"):
            write_task_folder(tasks, [("single_route", b3)])
        self.assertFalse(os.path.exists(tasks))
        write_task_folder(tasks, [("single_route", b3)], allow_other_benchmark=True)
        out = os.path.join(self.work, "out")
        harness_output(out, tasks, lambda benchmark, doc: self.answers[doc["sft_prompt"]])
        imported = os.path.join(self.work, "imported")
        status, _, stderr = harness("import", out, "--out", imported)
        self.assertEqual((status, stderr), (0, ""))
        run = json.loads(read(os.path.join(imported, "transitlm_single_route", "run.json")))
        self.assertEqual(run["benchmark_check"]["looks_like"], "diversity")

    def test_the_run_named_three_ways_and_credentials_left_out(self):
        out, folder = self.output(benchmarks=("single_route",), model_args={
            "base_url": "http://user:pw@127.0.0.1:8000/v1/chat/completions?api-key=QSECRET",
            "model": "org/model-a", "api_key": "sk-SECRET", "auth_token": "t0ken"})
        results = [name for name in os.listdir(folder) if name.startswith("results_")][0]
        # lm_eval --output_path run.json writes run_<date>.json and the samples beside it.
        as_file = os.path.join(self.work, "as-file")
        shutil.copytree(folder, as_file)
        os.rename(os.path.join(as_file, results),
                  os.path.join(as_file, "run_" + results[len("results_"):]))
        for number, given in enumerate((out, folder, os.path.join(folder, results),
                                        os.path.join(as_file, "run.json"))):
            imported = os.path.join(self.work, "imported%d" % number)
            status, _, stderr = harness("import", given, "--out", imported,
                                        "--overwrite")
            self.assertEqual((status, stderr), (0, ""), given)
            text = read(os.path.join(imported, "transitlm_single_route", "run.json"))
            self.assertNotIn("SECRET", text)
            self.assertNotIn("t0ken", text)
            self.assertNotIn("pw@", text)
            generation = json.loads(text)["generation"]
            self.assertEqual(generation["model_args_removed"], ["api_key", "auth_token"])
            self.assertEqual(generation["model_args"]["model"], "org/model-a")
            self.assertEqual(generation["model_args"]["base_url"], "http://<redacted>@127.0.0.1"
                             ":8000/v1/chat/completions?<redacted>")

    def test_a_figure_other_than_the_harnesss_is_warned_about(self):
        out, folder = self.output(benchmarks=("single_route",))
        results = [os.path.join(folder, name) for name in os.listdir(folder)
                   if name.startswith("results_")][0]
        data = json.loads(read(results))
        data["results"]["transitlm_single_route"]["ea,none"] = 0.5
        with open(results, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        status, stdout, _ = harness("import", out, "--out", os.path.join(self.work, "i"))
        self.assertEqual(status, 0)
        self.assertIn("  WARNING: transitlm_single_route: ea differs from the harness's own "
                      "figure", stdout)

    def test_a_limit_run_imports_its_rows_and_says_so(self):
        out, _ = self.output(limit=5, benchmarks=("single_route", "personalized"),
                             foreign=(("mmlu_anatomy", 135), ("arc_easy", 40)))
        imported = os.path.join(self.work, "imported")
        status, stdout, stderr = harness("import", out, "--out", imported)
        self.assertEqual((status, stderr), (0, ""))
        self.assertRegex(stdout, r"transitlm_single_route +5 of 38 rows .*\(a subset: "
                                 r"lm_eval --limit; scored as --sample_count 5\)")
        self.assertIn("  left alone: 175 sample(s) of 2 other task(s) (mmlu_anatomy, "
                      "arc_easy)\n", stdout)
        self.assertEqual(sorted(os.listdir(imported)), ["transitlm_personalized",
                                                        "transitlm_single_route"])
        run = os.path.join(imported, "transitlm_single_route")
        report = json.loads(read(os.path.join(run, "report.json")))
        self.assertEqual(report["counts"]["samples"], 5)
        self.assertEqual(report["inputs"]["options"]["sample_count"], 5)
        self.assertIn("|rows:5|", report["signature"])
        self.assertEqual(json.loads(read(os.path.join(run, "run.json")))["generation"]["rows"],
                         {"scored": 5, "in_file": 38})
        status, stdout, _ = run_evaluator(load_benchmark("single_route"), [
            "--input", BUNDLED[0][1], "--predictions", os.path.join(run, "predictions.jsonl"),
            "--sample_count", "5", "--json", "-"])
        self.assertEqual(status, 0)
        self.assertEqual(stdout, read(os.path.join(run, "report.json")))

    def test_every_problem_is_one_line_and_nothing_is_written(self):
        out, folder = self.output(benchmarks=("single_route",))
        results = [os.path.join(folder, name) for name in os.listdir(folder)
                   if name.startswith("results_")][0]
        samples = [os.path.join(folder, name) for name in os.listdir(folder)
                   if name.startswith("samples_")][0]
        imported = os.path.join(self.work, "imported")

        def refused(pattern, given=out):
            status, stdout, stderr = harness("import", given, "--out", imported)
            self.assertEqual((status, stdout), (2, ""), stderr)
            self.assertEqual(len(stderr.splitlines()), 1, stderr)
            self.assertRegex(stderr, "^harness.py import: error: .*" + pattern)
            self.assertFalse(os.path.exists(imported))

        refused("no such file or folder", os.path.join(self.work, "nothing"))
        refused("holds no lm-evaluation-harness results", self.tasks)
        refused("not a results file", samples)
        original = read(samples)
        lines = original.splitlines(True)
        # A row of another test file, a row skipped (not a --limit run), a
        # row logged twice, an answer that is not text.
        for broken, pattern in (
                ([lines[0].replace(json.loads(lines[0])["doc"]["index_id"], "other")]
                 + lines[1:], "line 1: doc_id 0 has index_id \"other\", row 1 of .* another"),
                (lines[:3] + lines[4:], "but not row 4: only a run of the first rows"),
                (lines + lines[-1:], "line 39: doc_id 37 is logged twice"),
                ([lines[0].replace('"resps": [[', '"resps": [[null, ')] + lines[1:],
                 "line 1: resps holds 2 answers")):
            with open(samples, "w", encoding="utf-8") as handle:
                handle.write("".join(broken))
            refused(pattern)
        with open(samples, "w", encoding="utf-8") as handle:
            handle.write(original)
        # A damaged results file: fields of the wrong kind.
        good = read(results)
        for damage in ({"dataset_kwargs": ["x"]}, {"metadata": {"benchmark": "single_route",
                                                                 "input_sha256": "ab"}}):
            data = json.loads(good)
            data["configs"]["transitlm_single_route"].update(damage)
            data["n-samples"] = ["x"]
            with open(results, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            refused("task transitlm_single_route('s metadata)? names no ")
        with open(results, "w", encoding="utf-8") as handle:
            handle.write(good)
        # The files the rows were scored against: changed, or gone.
        station = json.loads(read(os.path.join(self.tasks, "transitlm_tasks.json")))[
            "station_info"]
        copy = os.path.join(self.work, "stations.csv")
        shutil.copy(station, copy)
        text = read(results).replace(json.dumps(station), json.dumps(copy))
        with open(results, "w", encoding="utf-8") as handle:
            handle.write(text)
        with open(copy, "a", encoding="utf-8") as handle:
            handle.write("\n")
        refused(r"the station file of task transitlm_single_route, .* has changed since the "
                r"harness ran \(SHA-256 889a5dbf then, [0-9a-f]{8} now\)")
        os.remove(copy)
        refused("the station file of task transitlm_single_route, .* is missing")
        # A run folder already there.
        out2, _ = self.output("out2", benchmarks=("single_route",))
        os.makedirs(os.path.join(imported, "transitlm_single_route"))
        with open(os.path.join(imported, "transitlm_single_route", "report.json"), "w") as h:
            h.write("{}")
        status, _, stderr = harness("import", out2, "--out", imported)
        self.assertEqual(status, 2)
        self.assertIn("already holds a run", stderr)
        shutil.rmtree(imported)
        # No TransitLM task; two runs in one output folder.
        out3, folder3 = self.output("out3", benchmarks=("none",), foreign=(("arc_easy", 3),))
        refused("holds no TransitLM task", out3)
        os.makedirs(os.path.join(out3, "org__model-b"))
        shutil.copy(results, os.path.join(out3, "org__model-b"))
        os.remove([os.path.join(folder3, n) for n in os.listdir(folder3)
                   if n.startswith("results_")][0])
        shutil.copy(results, os.path.join(folder3, "results_2026-11-29T00-00-00.json"))
        refused("holds 2 harness runs", out3)

    def test_a_moved_task_folder_is_refused(self):
        out, _ = self.output(benchmarks=("single_route",))
        moved = os.path.join(self.work, "moved")
        shutil.copytree(self.tasks, moved)
        os.remove(os.path.join(moved, "transitlm_tasks.json"))
        model = os.path.join(out, "org__model-a")
        results = [os.path.join(model, n) for n in os.listdir(model) if n.startswith("results_")][0]
        text = read(results).replace(json.dumps(self.tasks)[1:-1], json.dumps(moved)[1:-1])
        with open(results, "w", encoding="utf-8") as handle:
            handle.write(text)
        status, _, stderr = harness("import", out, "--out", os.path.join(self.work, "i"))
        self.assertEqual(status, 2)
        self.assertIn("the task folder of transitlm_single_route is not there any more", stderr)


class CompareImportedRunsTest(unittest.TestCase):
    """compare.py over two imported harness runs and an evaluator run of the
    same test files: intervals, paired differences, breakdowns, the page and
    the main table; another protocol is another group."""

    def test_compare_two_imported_runs_and_an_evaluator_run(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        tasks = os.path.join(tmp, "tasks")
        write_task_folder(tasks, BUNDLED[:2])
        answers = all_answers()
        runs = []
        for model, keep in (("org/model-a", lambda n: True), ("org/model-b", lambda n: n % 3)):
            out = os.path.join(tmp, model.split("/")[1])
            harness_output(out, tasks, lambda benchmark, doc: answers[doc["sft_prompt"]]
                           if keep(doc["row"]) else "no idea", model=model)
            status, _, stderr = harness("import", out, "--out", os.path.join(tmp, "i", model))
            self.assertEqual(status, 0, stderr)
            runs.append(os.path.join(tmp, "i", model))
        labels = os.path.join(tmp, "labels")
        status, _, stderr = run_evaluator(load_benchmark("single_route"), [
            "--input", BUNDLED[0][1], "--input_field", "sft_label", "--out", labels])
        self.assertEqual(status, 0, stderr)
        page = os.path.join(tmp, "compare.html")
        argv = [os.path.join(runs[0], "transitlm_single_route"),
                os.path.join(runs[1], "transitlm_single_route"), labels,
                os.path.join(runs[0], "transitlm_personalized"),
                os.path.join(runs[1], "transitlm_personalized"),
                "--json", "-", "--by", "failure", "--by", "city", "--html", page,
                "--bootstrap", "200"]
        status, stdout, stderr = run_compare(argv)
        self.assertEqual(status, 0, stderr)
        result = json.loads(stdout)
        self.assertEqual(result["models"], ["org/model-a", "org/model-b", "labels"])
        group = result["groups"][0]
        self.assertEqual((group["benchmark"], [run["name"] for run in group["runs"]]),
                         ("single_route", ["org/model-a", "org/model-b", "labels"]))
        self.assertEqual(group["rows"]["paired"], 38)
        conn = [c for c in group["comparisons"]
                if c["run"] == "org/model-b" and c["metric"] == "conn"][0]
        self.assertLess(conn["delta"], 0)
        self.assertIsNotNone(conn["ci"])
        self.assertIn("city", group["breakdowns"])
        self.assertEqual(len(result["main_table"]["columns"]), 2)
        self.assertIn("org/model-b", read(page))
        def imported_against_the_first(name, tasks, **output):
            """The bundled answers of benchmark 1 asked through ``tasks``,
            imported, compared with the first imported run -> compare's JSON."""
            out = os.path.join(tmp, name)
            harness_output(out, tasks, lambda benchmark, doc: answers[doc["sft_prompt"]],
                           **output)
            status, _, stderr = harness("import", out, "--out", os.path.join(tmp, "i", name))
            self.assertEqual(status, 0, stderr)
            status, stdout, stderr = run_compare([
                os.path.join(runs[0], "transitlm_single_route"),
                os.path.join(tmp, "i", name, "transitlm_single_route"), "--json", "-",
                "--bootstrap", "0"])
            self.assertEqual(status, 0, stderr)
            return json.loads(stdout)

        # The same answers asked with another system prompt: told apart.
        other_tasks = os.path.join(tmp, "other-prompt-tasks")
        write_task_folder(other_tasks, BUNDLED[:1], system_prompt="Plan a route; answer in JSON.")
        compared = imported_against_the_first("other-prompt", other_tasks, model="org/model-c")
        self.assertIsNone(compared["signature"])
        self.assertTrue(any("asked different questions" in note and "prompt:file#" not in note
                            and "file#" in note and "column#" in note
                            for note in compared["notes"]), compared["notes"])
        # The same answers scored under the paper protocol: another group.
        paper_tasks = os.path.join(tmp, "paper-tasks")
        write_task_folder(paper_tasks, BUNDLED[:1], protocol="paper")
        compared = imported_against_the_first("paper", paper_tasks)
        self.assertEqual([(g["benchmark"], g["protocol"]) for g in compared["groups"]],
                         [("single_route", "reference"), ("single_route", "paper")])


    def test_the_folders_around_a_run_say_what_to_give_instead(self):
        # Issue 46.6: compare.py given the import's --out (a run folder per
        # task, no figures of its own), the harness's output or the task
        # folder says what it is and what to give, not "no report.json".
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        tasks = os.path.join(tmp, "tasks")
        write_task_folder(tasks, BUNDLED[:2])
        answers = all_answers()
        out = os.path.join(tmp, "lm_eval_out")
        model_folder = harness_output(out, tasks,
                                      lambda benchmark, doc: answers[doc["sft_prompt"]])
        imported = os.path.join(tmp, "imported")
        status, _, stderr = harness("import", out, "--out", imported)
        self.assertEqual(status, 0, stderr)
        task_runs = [os.path.join(imported, TASKS[name]) for name in BENCHMARK_NAMES[:2]]
        for given, words in (
                (imported, ["%s is not a run folder (no report.json) but holds 2 run folders, "
                            "as harness.py import writes one per task: give them, e.g. "
                            "compare.py " % imported] + task_runs),
                (out, ["%s is lm-evaluation-harness output" % out,
                       "python3 harness.py import %s --out DIR" % out]),
                (model_folder, ["%s is lm-evaluation-harness output" % model_folder]),
                (tasks, ["%s is a task folder harness.py lm-eval wrote" % tasks])):
            with self.subTest(given=given):
                status, stdout, stderr = run_compare([given])
                self.assertEqual((status, stdout), (2, ""))
                self.assertEqual(stderr.count("\n"), 1, stderr)
                self.assertNotIn("no report.json in this run folder", stderr)
                for text in words:
                    self.assertIn(text, stderr)
        # the runs it names are what compare takes
        status, _, stderr = run_compare(task_runs + ["--json", os.path.join(tmp, "c.json")])
        self.assertEqual(status, 0, stderr)
        # a folder of nothing known keeps the plain message
        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        self.assertIn("%s: no report.json in this run folder" % empty, run_compare([empty])[2])

if __name__ == "__main__":
    unittest.main()

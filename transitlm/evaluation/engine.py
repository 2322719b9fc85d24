"""The run engine: a ``Benchmark`` (what a scenario script subclasses), the row
stream from samples to records (in this process, or in the worker processes
of ``transitlm.evaluation.workers``).

Standard library only; Python 3.8+.
"""

import functools
import itertools
import sys

from common import (
    InputError, PROTOCOLS, Route, RowError, StationNetwork, decode_json, read_prompt,
    route_json, station_cache_folder)
from transitlm.evaluation import benchmark_check, network_check, workers
from transitlm.evaluation.answers import read_answer
from transitlm.evaluation.inputs import PredictionsFile, RowsSource, SampleReader, no_rows_problem
from transitlm.evaluation.chat_messages import run_prompt
from transitlm.evaluation.provenance import read_generation
from transitlm.evaluation.records import (
    Aggregate, NO_RESPONSE, base_record, error_record, finish_record)
from transitlm.evaluation.catalog import benchmark_info, station_file
from transitlm.evaluation.reports import (
    build_report, details_bytes, details_line, details_parts, failure_line, failure_line_for,
    failure_text, render_funnel)
from transitlm.io.terminal import Progress

# Rows decoded and judged together: few enough that a batch's decoded JSON is
# still in the CPU's caches when its rows are judged (32 rows take about 2 %
# less time than 256).  A scenario may set its own (Benchmark.batch_rows).
BATCH_ROWS = 32
# The rows whose labels the network check looks at (network_check).
_SAMPLE_HEAD, _SAMPLE_STRIDE = network_check.SAMPLE_HEAD, network_check.SAMPLE_STRIDE


class Benchmark(object):
    """What a scenario script provides to the engine; subclass and override.

    Every hook returns values; none edits the report.
    """

    name = ""                    # report "benchmark": its entry in transitlm.evaluation.catalog
    batch_rows = None            # rows per evaluate_batch call (None: BATCH_ROWS)
    needs_req_type = False
    empty_prediction_is_no_response = False
    station_names = False        # routes name stations (general LLM) instead of ids

    @property
    def title(self):
        """The heading of the text report (from the catalogue)."""
        return benchmark_info(self.name).title

    @property
    def default_input(self):
        """The bundled example test file, in data/ (from the catalogue)."""
        return benchmark_info(self.name).default_input

    def option_defaults(self):
        """The scenario's own options and their defaults (beside Options.DEFAULTS)."""
        return {}

    def figure_options(self):
        """Scenario options that can change a figure (recorded in the report)."""
        return ()

    def add_arguments(self, parser):
        pass

    def prepare(self, context):
        """Load what the scenario needs (called once, after the station file)."""

    def input_files(self, options):
        """(what, path) of the files the scenario reads besides the test file,
        the predictions and the station file (no output may replace one)."""
        return []

    def inputs(self, context):
        """Scenario input files and services -> dict for the report's ``inputs``."""
        return {}

    def input_hashes(self, context):
        """SHA-256 of the scenario's input files by role (``inputs.sha256``)."""
        return {}

    def sample_fields(self, sample):
        """Fields every record of this sample carries, error rows included."""
        return {}

    def in_funnel_default(self, protocol):
        """Do error and no-response rows enter Round 1?"""
        return True

    def label_drawing(self, label, protocol):
        """The label's routes as judged (``label_routes`` of a record: see
        route_json) from its decoded JSON; raises RowError when it does not
        parse.  Rows not evaluated carry them too, so a page draws the label."""
        return {"first": route_json(Route(label, protocol, "label"))}

    def evaluate(self, row, context):
        """Evaluate one decoded row -> record fields (raise RowError if it can't)."""
        raise NotImplementedError

    def evaluate_batch(self, rows, context):
        """Evaluate decoded rows -> a list of record fields or RowError, in order."""
        out = []
        for row in rows:
            try:
                out.append(self.evaluate(row, context))
            except RowError as exc:
                out.append(exc.detached())      # see RowError
        return out

    def scenario_codes(self, record, protocol):
        """Failure codes of the scenario's own stages (preference, diversity)."""
        return []

    def totals(self, protocol):
        """Running totals of the scenario's sections (an object with add(record)
        and sections() -> {"rounds": {...}} and/or other report keys), or None."""
        return None

    def can_run_in_workers(self, context):
        """May rows be split across worker processes (--workers)?"""
        return True

    def render(self, out, report):
        render_funnel(out, report["rounds"])

    def warnings(self, context):
        """Lines for the report's warnings (after the run)."""
        return []

    def label_station_names(self, context):
        """The station names a label's names are matched against, for the
        network check (transitlm.evaluation.network_check), when routes name stations:
        None = the station file's station_name column."""
        return None


class Options(object):
    """What a run depends on besides its rows: the CLI's flags or the API's keywords.

    The engine reads only this (never an argparse namespace).
    """

    DEFAULTS = {"input": None, "input_field": "generate_results", "predictions": None,
                "strict_json": False, "sample_count": None, "station_info": None,
                "protocol": "reference", "workers": 1, "quiet": True,
                network_check.FLAG: False, benchmark_check.FLAG: False}
    # Options that can change a figure or the row set: recorded in the report.
    FIGURE_OPTIONS = ("protocol", "input_field", "sample_count", "strict_json")

    def __init__(self, benchmark, **values):
        defaults = dict(self.DEFAULTS)
        defaults.update(benchmark.option_defaults())
        unknown = sorted(set(values) - set(defaults))
        if unknown:
            raise InputError("unknown option(s) %s (known: %s)"
                             % (", ".join(unknown), ", ".join(sorted(defaults))))
        defaults.update(values)
        self.__dict__.update(defaults)
        if self.protocol not in PROTOCOLS:
            raise InputError("unknown protocol %r (known: %s)"
                             % (self.protocol, ", ".join(sorted(PROTOCOLS))))
        self.figure_options = self.FIGURE_OPTIONS + tuple(benchmark.figure_options())

    # Where the options came from: "cli" (flags) or "api" (keywords), so a
    # message names an option as its user wrote it.
    interface = "cli"

    def flag(self, name):
        """An option as its user writes it: --name (command line) or name= (API)."""
        return ("--%s" % name) if self.interface == "cli" else ("%s=" % name)

    def recorded(self):
        return {key: getattr(self, key) for key in self.figure_options}


class DecodedRow(object):
    """A sample whose cells are decoded: origin, destination, city, label, prediction."""

    __slots__ = ("sample", "origin", "destination", "city", "label", "prediction", "index")

    def __init__(self, sample, origin, destination, city, label, prediction):
        self.index = None
        self.sample = sample
        self.origin = origin
        self.destination = destination
        self.city = city
        self.label = label
        self.prediction = prediction


class Context(object):
    """What evaluation needs besides the row: network, protocol, options."""

    def __init__(self, options, protocol, network):
        self.options = options
        self.protocol = protocol
        self.network = network
        # Records carry the routes as judged (prediction_routes, label_routes:
        # see route_json) only for an output that shows them: the details, the
        # HTML page (drawn from the details) and the Python API's records.
        self.route_drawings = True
        # Counts reported under input_notes (e.g. json_extracted: predictions
        # whose JSON was cut out of surrounding text); summed across workers.
        self.tally = {}
        # Predictions are a model's own text (a predictions file, the API's
        # rows), read as a model writes it (transitlm.evaluation.answers), not cells of
        # a release file, read as the published evaluator reads them.
        self.model_text = bool(options.predictions)
        # The labels' stations counted against the network as rows go by
        # (transitlm.evaluation.network_check); None where nobody asks (the reward).
        self.label_stations = None
        # Benchmark 3 judges whether each predicted route is a real one only
        # when the reward asks (transitlm/reward/diversity.py): then
        # {"line_info": the line file's path, or None where there is none}.
        self.real_routes = None

    def count(self, key, amount=1):
        if type(amount) is set:        # a set of what was seen (network_check)
            self.tally.setdefault(key, set()).update(amount)
            return
        self.tally[key] = self.tally.get(key, 0) + amount


# -- the row stream -----------------------------------------------------------

def _is_empty_prediction(sample):
    value = sample.prediction
    return value is None or (isinstance(value, str) and not value.strip())


class RowJudge(object):
    """Turns samples into finished records: decoding, the scenario's checks,
    failure codes.  One per run (and per worker process)."""

    def __init__(self, benchmark, context):
        self.benchmark = benchmark
        self.context = context
        self.protocol = context.protocol
        options = context.options
        # A model's text is read leniently (reasoning, text around the JSON)
        # from a predictions file and from the API's rows; an inline
        # generate_results cell strictly, as the published evaluator does.
        self.strict = options.strict_json or not context.model_text
        self.empty_is_no_response = (benchmark.empty_prediction_is_no_response
                                     or context.model_text)
        self.in_funnel = benchmark.in_funnel_default(context.protocol)
        # The network check's label stations (network_check), or None.
        self.label_stations = context.label_stations

    def _not_evaluated(self, sample, message, status="error", code=None, prompt=None):
        record = error_record(sample, message, self.in_funnel, status, code, prompt)
        record.update(self.benchmark.sample_fields(sample))
        if sample.generator_error is not None:
            record["generator_error"] = sample.generator_error
        if self.context.route_drawings:
            try:
                label = decode_json(sample.label, "sft_label", code="invalid_label")
                record["label_routes"] = self.benchmark.label_drawing(label, self.protocol)
            except RowError:
                pass            # a label that does not parse is not drawn
        return record

    def decode(self, sample):
        """A sample -> DecodedRow, or the finished record of a row not evaluated."""
        if sample.problem:
            code, message = sample.problem
            return self._not_evaluated(sample, message, code=code)
        try:
            prompt = read_prompt(sample.prompt)
        except RowError as exc:
            return self._not_evaluated(sample, str(exc), code=exc.code)
        origin, destination, city = prompt
        if not sample.has_prediction:
            message = ("generator error: %s" % sample.generator_error
                       if sample.generator_error is not None else "no prediction for this id")
            return self._not_evaluated(sample, message, NO_RESPONSE, prompt=prompt)
        # An empty output: the general-LLM evaluator (as published) and a
        # predictions file call it no response; inline it is unreadable JSON.
        if self.empty_is_no_response and _is_empty_prediction(sample):
            return self._not_evaluated(sample, "empty prediction", NO_RESPONSE, prompt=prompt)
        try:
            label = decode_json(sample.label, "sft_label", code="invalid_label")
            stations = self.label_stations
            if stations is not None and (sample.row <= _SAMPLE_HEAD
                                         or not sample.row % _SAMPLE_STRIDE):
                stations.add(label)
            if self.strict and sample.prediction == sample.label:
                # The label's very text (a model that got it right): the same
                # JSON, decoded once and shared (decoded values are never
                # changed), and judge_single_route parses it once.
                return DecodedRow(sample, origin, destination, city, label, label)
            answer = read_answer(sample.prediction, strict=self.strict)
        except RowError as exc:
            if exc.code == "unclosed_reasoning":        # cut off: no route was read
                self.context.count("reasoning_unclosed")
            return self._not_evaluated(sample, str(exc), code=exc.code, prompt=prompt)
        if answer.reasoning:
            self.context.count("reasoning")
        if answer.extracted:
            self.context.count("json_extracted")
        return DecodedRow(sample, origin, destination, city, label, answer.value)

    def records(self, samples):
        """Samples (an iterator) -> finished records, one per sample, in order.

        Rows go through in batches of BATCH_ROWS (or the benchmark's
        batch_rows: the general LLM judges a batch with one request), so
        memory holds one batch, never the run.
        """
        size = self.benchmark.batch_rows or BATCH_ROWS
        batch = []
        for sample in samples:
            batch.append(self.decode(sample))
            if len(batch) >= size:
                yield from self._judge(batch)
                batch = []
        if batch:
            yield from self._judge(batch)

    def record(self, sample):
        """One sample -> its finished record (records() for a single row,
        without a generator: the reward judges a completion at a time)."""
        return self._judge([self.decode(sample)])[0]

    def _judge(self, batch):
        """A batch of decode()'s results -> its finished records (a list)."""
        rows = [item for item in batch if type(item) is DecodedRow]
        results = iter(self.benchmark.evaluate_batch(rows, self.context) if rows else ())
        benchmark, protocol = self.benchmark, self.protocol
        # The Benchmark hooks a scenario does not override add nothing: not
        # called (a call and a dictionary update saved per row).
        sample_fields = (benchmark.sample_fields
                         if type(benchmark).sample_fields is not Benchmark.sample_fields
                         else None)
        scenario_codes = type(benchmark).scenario_codes is not Benchmark.scenario_codes
        out = []
        for item in batch:
            if type(item) is not DecodedRow:
                out.append(item)
                continue
            fields = next(results)
            sample = item.sample
            if isinstance(fields, RowError):
                out.append(self._not_evaluated(sample, str(fields), code=fields.code,
                                               prompt=(item.origin, item.destination,
                                                       item.city)))
                continue
            record = base_record(sample, item.origin, item.destination, item.city)
            if sample_fields is not None:
                record.update(sample_fields(sample))
            record.update(fields)
            out.append(finish_record(record, benchmark, protocol, scenario_codes))
        return out


class RowSinks(object):
    """Where each finished row goes: the details file, the failure listing
    (spooled to a temporary file, printed after the rounds), the running
    aggregate and, for the Python API, a list."""

    def __init__(self, aggregate, details=None, failures=None, collect=None):
        self.aggregate = aggregate
        self.details = details          # binary file or None
        self.failures = failures        # text spool or None
        self.failing = 0
        self.collect = collect          # list or None

    def add(self, record):
        if self.details is not None:
            self.details.write(details_bytes(record))
        if self.failures is not None:
            line = failure_line(record)
            if line is not None:
                self.failures.write(line)
                self.failing += 1
        if self.collect is not None:
            self.collect.append(record)
        self.aggregate.add(record)

    def render_chunk(self, records):
        """A worker's side of add() for a chunk of records (an iterator, taken
        one at a time): their row numbers, details lines (in two parts around
        the row number: see details_parts), failure lines (without the row
        number) and the state of a deferred Aggregate of them.  add_chunk in
        the parent writes them, the row numbers shifted by ``offset``."""
        rows = []
        details = [] if self.details is not None else None
        failures = [] if self.failures is not None else None
        aggregate = self.aggregate.deferred()
        fold = aggregate.add
        for index, record in enumerate(records):
            rows.append(record["row"])
            fold(record)
            if details is not None:
                details.append(details_parts(record))
            if failures is not None:
                text = failure_text(record)
                if text is not None:
                    failures.append((index, text))
        return rows, details, failures, aggregate.state()

    def add_chunk(self, rows, details, failures, totals, offset=0):
        if self.details is not None:
            self.details.write(b"".join([details_line(head, row + offset, tail)
                                         for row, (head, tail) in zip(rows, details)]))
        if self.failures is not None:
            self.failures.write("".join([failure_line_for(rows[index] + offset, text)
                                         for index, text in failures]))
            self.failing += len(failures)
        self.aggregate.merge(totals)


def evaluate_stream(benchmark, options, sinks_for, rows=None):
    """The engine: stream the rows through the checks into the sinks.

    ``sinks_for(aggregate)`` makes the RowSinks once the aggregate exists;
    ``rows`` (dicts) replaces the input file.  Returns (report, sinks, network).
    """
    protocol = PROTOCOLS[options.protocol]
    station_path = station_file(options.station_info)
    prediction_column = None if options.predictions else options.input_field
    # What the answers were asked (transitlm.evaluation.chat_messages): none for the labels,
    # else what generate.py recorded beside a predictions file.
    prompt = run_prompt(prediction_column == "sft_label",
                        read_generation(options.predictions) if options.predictions else None)
    warnings = []
    worker_count = options.workers or workers.available_cores()
    if rows is not None:
        source = RowsSource(rows, prediction_column, benchmark.needs_req_type,
                            options.sample_count)
    else:
        # Read in chunks (parsed by the worker processes, or in this process
        # as a worker does: see SampleReader._parsed_chunks) unless test rows
        # are joined to a predictions file as they stream by.
        source = SampleReader(options.input, prediction_column, benchmark.needs_req_type,
                              options.sample_count, chunked=not options.predictions,
                              defer_columns=True)
    input_name = options.input if rows is None else None
    with source:
        # Whole-file problems, from the file's first rows: no row, not UTF-8.
        head = source.head()
        problem = head.problem(input_name)
        if problem:
            raise InputError(problem)
        predictions = None
        if options.predictions:
            predictions = PredictionsFile.read(options.predictions)
        network = StationNetwork.load(station_path, station_cache_folder())
        # Another benchmark's file (transitlm.evaluation.benchmark_check), then the
        # columns this run needs.
        other_benchmark = _benchmark_check(benchmark, options, head, network, rows is not None)
        problem = source.column_problem(
            hint=_column_hint(options) if "generate_results" in source.missing_columns else "")
        if problem:
            raise InputError(problem)
        context = Context(options, protocol, network)
        context.model_text = context.model_text or rows is not None
        benchmark.prepare(context)
        checked = _network_checks(benchmark, options, context, rows is None)
        # The labels scored as answers: rows by failure code (the labels check).
        # The rows' ids are kept for the warning about repeated ids unless a
        # predictions file's join tells of them.
        aggregate = Aggregate(benchmark, protocol, count_codes=prediction_column == "sft_label",
                              row_ids=predictions is None)
        sinks = sinks_for(aggregate)
        context.route_drawings = sinks.details is not None or sinks.collect is not None
        samples = iter(source)
        if predictions is not None:
            samples = predictions.join(samples)
        # Under --sample_count the rows to evaluate are known: the line counts
        # them, not the share of the whole file read.  Otherwise it shows the
        # share of the file read, scaled down by the rows read but not yet
        # evaluated (handed to workers), so it never says 100 % early.
        enabled = sys.stderr.isatty() and not options.quiet
        fraction = None
        if enabled and not options.sample_count:
            samples, read = _counted(samples)
            fraction = functools.partial(_share_done, source.fraction_read, read,
                                         lambda: progress.done)
        progress = Progress(options.sample_count or None, enabled, fraction=fraction)
        try:
            done = False
            if (worker_count > 1 and rows is None and sinks.collect is None and workers.can_fork()
                    and benchmark.can_run_in_workers(context)):
                judge = RowJudge(benchmark, context)
                if source.chunked:
                    # Read ahead a chunk per worker, to know how many the file can feed.
                    chunks = source.chunks()
                    head = list(itertools.islice(chunks, worker_count))
                    if len(head) > 1:
                        spans = source.span_file() is not None
                        tasks = workers.byte_tasks(itertools.chain(head, chunks), spans)
                        done = workers.evaluate_in_workers(judge, tasks, sinks, progress,
                                                           len(head), source)
                    if not done:
                        samples = source.rows_from(head, 1)
                else:
                    # Read ahead enough rows to know how many workers the file can feed.
                    samples = _MinimumRows(samples, workers.MIN_ROWS_PER_WORKER * worker_count)
                    worker_count = samples.known // workers.MIN_ROWS_PER_WORKER
                    if worker_count > 1:
                        done = workers.evaluate_in_workers(judge, workers.row_tasks(samples),
                                                           sinks, progress, worker_count)
            if not done:
                for record in RowJudge(benchmark, context).records(samples):
                    sinks.add(record)
                    progress.step()
        finally:
            progress.finish()
        input_hash = source.finish()
    sha = {"input": input_hash, "station_info": network.sha256}
    inputs = {"input": options.input if rows is None else "<rows>",
              "input_field": options.input_field, "predictions": options.predictions,
              "station_info": station_path, "line_info": None,
              "options": options.recorded(), "sha256": sha, "prompt": prompt}
    inputs.update(benchmark.inputs(context))
    sha.update(benchmark.input_hashes(context))
    notes = {}
    if other_benchmark:
        inputs["benchmark_check"] = other_benchmark["record"]
        warnings.extend(other_benchmark["warnings"])
    warnings.extend(source.warnings)
    warnings.extend(network.warnings)
    if predictions is not None:
        problem = predictions.unjoined_problem(options.input if rows is None else "the rows")
        if problem:
            raise InputError(problem)
        sha["predictions"] = predictions.sha256
        notes["predictions_join"] = predictions.statistics()
        warnings.extend(predictions.warnings())
    checked["verdict"] = context.label_stations.verdict(
        station_path, context.tally.pop(network_check.TALLY_STATIONS, set()))
    network_warnings = checked["warnings"] + network_check.enforce(
        checked["verdict"], checked["allowed"], options.flag(network_check.FLAG))
    notes.update(sorted(context.tally.items()))
    warnings.extend(benchmark.warnings(context))
    warnings.extend(network_warnings)
    inputs["network_check"] = dict(checked["verdict"].as_json(), allowed=checked["allowed"])
    if aggregate.row_ids is not None:
        repeated = aggregate.row_ids.warning()
        if repeated:
            warnings.append(repeated)
    report = build_report(benchmark, aggregate, context, inputs, notes, warnings)
    if not report["counts"]["samples"] and options.sample_count != 0:
        # A file whose first bytes hold no row but that held none further on
        # either (blank lines): the same whole-file problem.
        raise InputError(no_rows_problem(input_name))
    return report, sinks, network


def _benchmark_check(benchmark, options, head, network, rows_given):
    """Before any row: is the file plainly another benchmark's
    (transitlm.evaluation.benchmark_check)?  InputError unless allowed; allowed, ->
    {"record": for report.json's inputs, "warnings": [...]}, else None."""
    verdict = benchmark_check.benchmark_verdict(benchmark.name, head.header, head.rows, network)
    if verdict.ok:
        return None
    allowed = bool(getattr(options, benchmark_check.FLAG))

    def use(name):
        if options.interface == "cli":
            return benchmark_info(name).command
        return "transitlm.evaluate(%r, ...)" % name
    override = options.flag(benchmark_check.FLAG)
    if options.interface != "cli":
        override += "True"
    subject = "the rows given" if rows_given else "input file %s" % options.input
    warnings = benchmark_check.enforce(verdict, allowed, subject, override, use)
    return {"record": verdict.as_json(allowed), "warnings": warnings}


def _column_hint(options):
    """What to add to the message of a file without its prediction column:
    where a model's answers go, or how to score the labels instead."""
    if options.predictions or options.input_field != "generate_results":
        return ""
    if options.interface == "cli":
        return ("; a test file without answers takes them from --predictions FILE (JSON Lines "
                "or CSV of index_id and generate_results), or --input_field sft_label scores "
                "its labels")
    return ("; a test file without answers takes them from predictions=FILE (JSON Lines or CSV "
            "of index_id and generate_results), or input_field='sft_label' scores its labels")


def _network_checks(benchmark, options, context, from_file):
    """Before any row: the network record beside the test file against the
    files given (InputError unless allowed); then the labels' stations are
    counted as the rows go by (judged by tally_verdict after them)."""
    allowed = bool(getattr(options, network_check.FLAG))
    flag = options.flag(network_check.FLAG)
    warnings = []
    if from_file:
        line_path = getattr(benchmark, "line_info_path", None)
        line_sha = network_check.cached_sha256(line_path) if line_path else None
        warnings = network_check.enforce(
            network_check.record_verdict(options.input, context.network.sha256, line_sha),
            allowed, flag)
    context.label_stations = network_check.LabelStations(
        context.network, benchmark.station_names, tally=context,
        names=benchmark.label_station_names(context) if benchmark.station_names else None)
    return {"allowed": allowed, "warnings": warnings}


def _counted(iterable):
    """-> (an iterator over ``iterable``, a function giving how many items it
    has yielded so far)."""
    count = [0]

    def counting():
        for item in iterable:
            count[0] += 1
            yield item
    return counting(), lambda: count[0]


def _share_done(fraction_read, rows_read, rows_done):
    """The share of the input evaluated: the share of the file read, times the
    share of the rows read that are done (None when the share read is not
    known, as for a pipe).  Rows not read row by row (chunks parsed by the
    workers) count as done when read."""
    share = fraction_read()
    if share is None:
        return None
    read = rows_read()
    if read:
        share *= min(1.0, rows_done() / read)
    return share


class _MinimumRows(object):
    """An iterator that first reads ahead up to ``limit`` items (``known`` of
    them were there), to tell how many worker processes a stream can feed."""

    def __init__(self, items, limit):
        self._items = iter(items)
        self._head = []
        for item in self._items:
            self._head.append(item)
            if len(self._head) >= limit:
                break
        self.known = len(self._head)

    def __iter__(self):
        head, self._head = self._head, []
        for item in head:
            yield item
        for item in self._items:
            yield item

"""The bootstrap intervals compare.py reports, simulated on rows of a known
Conn rate for tests/test_compare_bootstrap.py's interval-quality tests: pure
computation, run by tests.support.Offloaded in a process of its own while the
suite goes on."""

import random

from tests.support.synthetic_runs import evaluated_record
from transitlm.compare import bootstrap as resampling
from transitlm.compare import group_figures as comparison
from transitlm.compare import metric_terms


class FakeRun(object):
    benchmark, protocol, details_path = "single_route", "reference", "<memory>"


def conn_interval(records, resamples, seed, confidence=0.95):
    columns = metric_terms.term_columns(FakeRun(), records, ["conn"])
    series = [(columns[0]["conn"], columns[1]["conn"])]
    draws = comparison.resampled_metrics(series, len(records), resamples, seed)[0]
    return resampling.percentile_interval(draws, confidence)


def bernoulli_records(n, rate, seed):
    rng = random.Random(seed)
    return [evaluated_record(i + 1, "r%d" % i, reachable=rng.random() < rate)
            for i in range(n)]


def coverage_hits(true_rate, samples, rows, resamples):
    """How many of ``samples`` independent samples (seeds 0, 1, ...) of
    ``rows`` rows with Conn rate ``true_rate`` get a 95 % interval holding it."""
    hits = 0
    for seed in range(samples):
        low, high = conn_interval(bernoulli_records(rows, true_rate, seed), resamples, seed)
        hits += low <= true_rate <= high
    return hits


def one_interval(rows, rate, records_seed, resamples, seed):
    """One sample's observed rate and 95 % interval -> {rate, low, high}."""
    records = bernoulli_records(rows, rate, records_seed)
    low, high = conn_interval(records, resamples, seed)
    return {"rate": sum(r["reachable"] for r in records) / len(records), "low": low,
            "high": high}

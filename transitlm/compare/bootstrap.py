"""Paired bootstrap over rows: resampled column sums, percentile intervals and
two-sided p-values (standard library only; used by compare.py).

Every TransitLM metric is a ratio of two per-row sums (see
transitlm.evaluation.terms.metric_terms), so a bootstrap resample needs only the per-row
terms.  All terms of all runs for one row are packed into ONE Python integer
(each term in its own bit field; real numbers in fixed point), so a resample
costs one uniform draw and one big-integer addition per drawn row, whatever
the number of runs and metrics, and every run sees the same drawn rows
(paired).
"""

import math
import operator
import random

# Real-valued terms are summed in fixed point with this many significant bits
# below the largest term's leading bit (a double has 53): a resampled sum is
# off by at most n * max|term| * 2**-(FIXED_POINT_BITS + 1), far below any
# printed digit.
FIXED_POINT_BITS = 60


def column_scale(values):
    """How one column is stored: (offset, scale, exact) with
    q = round((v - offset) * scale).

    Integer (or bool) columns are stored exactly (exact True: offset their
    minimum if negative, scale 1); real columns in fixed point from their
    minimum.  None when a value is missing or not finite (the column cannot
    be resampled).
    """
    if any(v is None or isinstance(v, float) and not math.isfinite(v) for v in values):
        return None
    if all(isinstance(v, int) for v in values):   # bool is an int
        low = min(values) if values else 0
        return (low if low < 0 else 0, 1, True)
    low = min(values) if values else 0.0
    top = max((abs(v - low) for v in values), default=0.0)
    exponent = math.frexp(top)[1] if top else 0
    return (low, 2.0 ** (FIXED_POINT_BITS - exponent), False)


def pack_columns(columns, n):
    """Pack columns (each a list of n numbers) into n integers.

    -> (packed rows, layout); layout holds per column (shift, width, offset,
    scale) or None for a column that cannot be packed (see column_scale).
    """
    layout, quantized, shift = [], [], 0
    for values in columns:
        scale = column_scale(values)
        if scale is None:
            layout.append(None)
            continue
        offset, factor, exact = scale
        if exact:
            q = [int(v) - offset for v in values]
        else:
            q = [int(round((v - offset) * factor)) for v in values]
        # wide enough for the sum of n draws of the largest term, plus a guard bit
        width = (max(q, default=0) * max(n, 1)).bit_length() + 1
        layout.append((shift, width, offset, factor, exact))
        quantized.append((shift, q))
        shift += width
    packed = [0] * n
    for field_shift, q in quantized:
        packed = [p | (v << field_shift) for p, v in zip(packed, q)]
    return packed, layout


def unpack_sums(total, layout, n):
    """Column sums of n rows from the sum of their packed integers."""
    sums = []
    for entry in layout:
        if entry is None:
            sums.append(None)
            continue
        shift, width, offset, factor, exact = entry
        q = (total >> shift) & ((1 << width) - 1)
        if exact:
            sums.append(q + offset * n)
        else:
            sums.append(q / factor + offset * n)
    return sums


def bootstrap_column_sums(columns, n, resamples, seed):
    """Column sums over `resamples` bootstrap resamples of the n rows.

    Each resample draws n row indices uniformly with replacement from
    random.Random(seed) (deterministic); the same draws serve every column,
    which is what makes comparisons paired.  -> list (one per resample) of
    lists (one sum per column; None for a column that cannot be packed).
    """
    packed, layout = pack_columns(columns, n)
    # Rows with identical terms share one integer object (less memory; the
    # draw still visits each drawn row, one addition each).
    shared = {}
    packed = [shared.setdefault(p, p) for p in packed]
    rng = random.Random(seed)
    rows = range(n)
    out = []
    for _ in range(resamples):
        if n == 0:
            total = 0
        elif n == 1:
            total = packed[0]
        else:
            total = sum(operator.itemgetter(*rng.choices(rows, k=n))(packed))
        out.append(unpack_sums(total, layout, n))
    return out


def ratio(numerator, denominator):
    """numerator / denominator, None when undefined (as common.ratio)."""
    if numerator is None or denominator is None or not denominator:
        return None
    return numerator / denominator


def percentile(sorted_values, q):
    """The q-quantile (0..1) of sorted values, by linear interpolation between
    order statistics (position q * (m - 1), as numpy's default)."""
    if not sorted_values:
        return None
    position = q * (len(sorted_values) - 1)
    low = int(math.floor(position))
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def percentile_interval(values, confidence):
    """Percentile bootstrap interval [lo, hi] of the defined values (None
    values, from resamples where the metric has no denominator, are left
    out); None when no value is defined."""
    defined = sorted(v for v in values if v is not None)
    if not defined:
        return None
    tail = (1.0 - confidence) / 2.0
    return [percentile(defined, tail), percentile(defined, 1.0 - tail)]


def paired_p_value(deltas):
    """Two-sided p-value of a paired bootstrap:

        p = min(1, 2 * min(#{d <= 0}, #{d >= 0}) / m)

    over the m defined resampled differences d: twice the share of resamples
    on the other side of zero (a resample at exactly zero counts on both
    sides, so differences that are all zero give p = 1).  None when no
    difference is defined.
    """
    defined = [d for d in deltas if d is not None]
    if not defined:
        return None
    at_most = sum(1 for d in defined if d <= 0)
    at_least = sum(1 for d in defined if d >= 0)
    return min(1.0, 2.0 * min(at_most, at_least) / len(defined))

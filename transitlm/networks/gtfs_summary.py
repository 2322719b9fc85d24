"""What data/import_gtfs.py prints when a feed is imported: the service day,
the routes, stop times, trips and stop patterns read and kept, the stations
and lines written (the rail-bound ones named 地铁... so the evaluators count
them as subway), the stop rules, how the feed's fares are applied, and what
was skipped and why.  Feed text reaches the terminal escaped.

The importer itself is transitlm/networks/gtfs_import.py.  Standard library
only.
"""

import json

from transitlm.networks import limits


def fmt_count(n):
    """A count with thousands separators."""
    return "{:,}".format(n)


def summary(result, outputs, args, out_dir, city):
    """The lines printed after an import (``result`` of import_feed,
    ``outputs`` of build_outputs, the command line's ``args``)."""
    kept, patterns = result["kept"], result["patterns"]
    day = result["day"]
    lines = [
        "GTFS feed      %s" % args.feed,
        "service day    %s (%s)" % (day.strftime("%Y%m%d"),
                                    "given" if args.date else "busiest day of the feed"),
        "city, adcode   %s, %s" % (city, args.adcode),
        "routes         %s (route types: %s)" % (fmt_count(len(result["routes"])),
                                                 args.route_types or "all"),
        "stop times     %s read, %s of other days" % (fmt_count(result["stop_time_rows"]),
                                                      fmt_count(result["inactive_rows"])),
        "trips          %s run that day, %s kept (%s of %s stop patterns: %s)" % (
            fmt_count(result["active_trips"]), fmt_count(outputs["kept_trips"]),
            fmt_count(len(kept)), fmt_count(len(patterns)),
            "all" if args.patterns == "all" else "the most frequent per route and direction"),
        "stations       %s stops at %s places, %s transfer links%s" % (
            fmt_count(len(outputs["stations"])), fmt_count(outputs["places"]),
            fmt_count(outputs["links"]),
            "; stop ids written as %s + the feed's" % json.dumps(args.id_prefix)
            if args.id_prefix else ""),
        "lines          %s (%s)" % (fmt_count(len(outputs["lines"])),
                                    rail_summary(outputs["rail_lines"], len(outputs["lines"]))),
        "stop rules     %s pass-through stop times left out; on the lines %s stops without "
        "boarding, %s without alighting" % (
            fmt_count(result["pass_through"]), fmt_count(outputs["no_boarding"]),
            fmt_count(outputs["no_alighting"])),
        "fares          %s" % fare_summary(result["fares"], outputs["fare_kinds"]),
    ]
    skipped = result["skips"].lines()
    lines.append("skipped        %s" % (skipped[0] if skipped else "nothing"))
    lines.extend("               %s" % text for text in skipped[1:])
    lines.append("written        %s/{station_info,line_info,hop_times,line_service}.csv" % out_dir)
    # Feed text (names, ids, the time zone's city) reaches the terminal escaped.
    return "\n".join(limits.terminal_text(line) for line in lines)


def rail_summary(rail, lines):
    """How many lines are rail-bound (named 地铁... so the evaluators count
    them as subway lines), in words: none for a bus-only feed."""
    if not rail:
        return "no rail-bound line: all buses" if lines else "none"
    return "%s rail-bound, named 地铁..." % fmt_count(rail)


def fare_summary(table, kinds):
    """How the feed's fares are applied, in one line."""
    if table is None:
        return "none in the feed: make_benchmark.py prices rides by its distance table"
    parts = ["per ride: %s lines flat, %s by zone" % (fmt_count(kinds["flat"]), fmt_count(kinds["zones"]))]
    if kinds["none"]:
        parts.append("%s without a fare of the feed (distance table)" % fmt_count(kinds["none"]))
    if kinds["unpriced"]:
        parts.append("%s with zone pairs no fare applies to (such rides are not taken)"
                     % fmt_count(kinds["unpriced"]))
    transfer = table.transfer_fares()
    if transfer:
        parts.append("fare transfers not applied (%s fares allow them): each ride pays its fare"
                     % fmt_count(len(transfer)))
    return "; ".join(parts)

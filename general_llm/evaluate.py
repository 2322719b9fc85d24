#!/usr/bin/env python3
"""General-purpose LLM evaluation: predictions name stations instead of stop ids.

The boarding and alighting names of each leg are matched against line_info.csv
and judged on the station graph by the route-eval check (protocol.md §11) —
in-process by default, or by a route-eval service (`--api_url`, or the
TRANSIT_LM_API environment variable; `general_llm/server.py` is one).  The rest
of the funnel is the shared one of common.py.

Usage: python3 general_llm/evaluate.py [--input CSV] [--api_url URL] [--json PATH] ...
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":       # Ctrl-C while the modules load: no traceback
    from transitlm.io.exit_status import quiet_start
    quiet_start()

import common  # noqa: E402
import transitlm.evaluation.catalog  # noqa: E402
import transitlm.cli  # noqa: E402
import transitlm.evaluation.engine  # noqa: E402
import transitlm.io.exit_status  # noqa: E402
from transitlm.evaluation.provenance import without_credentials  # noqa: E402
from general_llm import route_eval  # noqa: E402

API_ENV = "TRANSIT_LM_API"


def predicted_names(prediction):
    """`station_name` when it is a non-empty list, else `station_sequence`."""
    try:
        names = common.text_list(prediction, "station_name")
        if any(name.strip() for name in names):
            return names
        return common.text_list(prediction, "station_sequence")
    except common.RowError as exc:
        raise common.RowError("prediction %s" % exc)


def stripped_names(lines):
    return [common.strip_line_suffix(name) for name in lines]


class LocalRouteEval(object):
    """The route-eval check in this process, with the service client's interface
    (so one batch path serves both)."""

    def __init__(self, lines, network):
        self.lines = lines
        self.network = network

    def evaluate(self, cases, on_batch_failure="raise"):
        return route_eval.evaluate_cases(cases, self.lines, self.network)


class GeneralLLM(transitlm.evaluation.engine.Benchmark):
    name = "general_llm"
    batch_rows = 256             # rows judged together (a service is sent --batch_size at a time)
    empty_prediction_is_no_response = True
    station_names = True

    def __init__(self):
        self.judge = None              # LocalRouteEval or a RouteEvalClient
        self.line_info_path = None

    def option_defaults(self):
        return {"line_info": None, "api_url": os.environ.get(API_ENV) or None,
                "batch_size": 50, "timeout": 30.0, "retries": 3,
                "allow_service_errors": False}

    def figure_options(self):
        return ("allow_service_errors",)

    def add_arguments(self, parser):
        parser.add_argument("--line_info", metavar="CSV",
                            help="line file for the in-process route-eval check (default: "
                                 "the line file beside the station file in use, named "
                                 "alike: line_info.csv, transit-lm-line-info.csv; a line "
                                 "file belongs to its station file's network)")
        parser.add_argument("--api_url", metavar="URL", default=os.environ.get(API_ENV),
                            help="route-eval service to ask instead of checking in-process "
                                 "(default: $%s; unset = in-process)" % API_ENV)
        parser.add_argument("--batch_size", type=int, default=50, metavar="N",
                            help="cases per request to the service (default 50)")
        parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                            help="time limit of one whole request to the service, answer "
                                 "included (default 30)")
        parser.add_argument("--retries", type=int, default=3, metavar="N",
                            help="retries of a failed request (connection error, timeout, "
                                 "5xx, invalid answer), with backoff 0.5 s, 1 s, 2 s, ... "
                                 "(default 3)")
        parser.add_argument("--allow_service_errors", action="store_true",
                            help="if the service stays unreachable, count its cases as "
                                 "unreachable (and report how many) instead of stopping "
                                 "with exit status 3")

    def in_funnel_default(self, protocol):
        # reference: Round 1 takes evaluated rows only; paper: all rows.
        return protocol.funnel_over_all_rows

    def prepare(self, context):
        options = context.options
        if options.batch_size < 1:
            raise common.InputError("%s must be at least 1" % options.flag("batch_size"))
        if options.retries < 0:
            raise common.InputError("%s must be 0 or more" % options.flag("retries"))
        if not (options.timeout > 0 and options.timeout != float("inf")):
            raise common.InputError("%s must be a number of seconds above 0, not %r"
                                    % (options.flag("timeout"), options.timeout))
        if options.api_url:
            from general_llm.service_client import RouteEvalClient
            try:
                self.judge = RouteEvalClient(options.api_url, batch_size=options.batch_size,
                                             timeout=options.timeout, retries=options.retries)
            except ValueError as exc:
                raise common.InputError(str(exc))
        else:
            self.line_info_path = transitlm.evaluation.catalog.line_file(
                options.line_info, transitlm.evaluation.catalog.station_file(options.station_info),
                options.flag("line_info"))
            self.judge = LocalRouteEval(route_eval.LineTable.load(self.line_info_path),
                                        context.network)

    def input_files(self, options):
        if options.api_url:
            return []
        return [("the line file", transitlm.evaluation.catalog.line_file(
            options.line_info, transitlm.evaluation.catalog.station_file(options.station_info),
            options.flag("line_info")))]

    def inputs(self, context):
        # Credentials in the service's URL never reach a report (or its signature).
        return {"line_info": self.line_info_path,
                "api_url": without_credentials(context.options.api_url)}

    def input_hashes(self, context):
        if not self.line_info_path:
            return {}
        return {"line_info": common.file_sha256(self.line_info_path)}

    def warnings(self, context):
        failures = context.tally.get("service_errors")
        if not failures:
            return []
        return ["%d case(s) counted unreachable because the route-eval service failed "
                "(%s)" % (failures, context.options.flag("allow_service_errors"))]

    def label_station_names(self, context):
        # The names the route-eval check matches on: those of the line file
        # (in-process); a service's are not known here (the station file's).
        if isinstance(self.judge, LocalRouteEval):
            return (station.name for line in self.judge.lines.lines
                    for station in line.stations)
        return None

    # -- per batch -------------------------------------------------------------
    def label_drawing(self, label, protocol):
        label = common.Route(label, protocol, "label")
        return {"first": common.route_json(label, route_eval.normalise_transfer_names(
            label.sequence, len(label.lines), protocol.trim_single_leg_names))}

    def build_case(self, row, protocol):
        """A decoded row -> (case for the route-eval check, pred Route, label Route,
        normalised predicted names, normalised label names)."""
        if not isinstance(row.prediction, dict):
            raise common.RowError("prediction is %s, expected a JSON object"
                                  % common.type_name(row.prediction))
        pred = common.Route(row.prediction, protocol, "prediction")
        label = common.Route(row.label, protocol, "label")
        trim = protocol.trim_single_leg_names
        names = route_eval.normalise_transfer_names(predicted_names(row.prediction),
                                                    len(pred.lines), trim)
        label_names = route_eval.normalise_transfer_names(label.sequence, len(label.lines),
                                                          trim)
        case = {"city": row.city, "start": list(row.origin), "end": list(row.destination),
                "pred": {"line_sequence": pred.lines, "station_name": names,
                         "start_transfer_mode": pred.start_mode,
                         "end_transfer_mode": pred.end_mode}}
        return case, pred, label, names, label_names

    def evaluate_batch(self, rows, context):
        """Judge a batch's cases together (one request to a service, where one is
        used) -> record fields or RowError per row, in order."""
        built, cases = [], []
        for row in rows:
            try:
                item = self.build_case(row, context.protocol)
            except common.RowError as exc:
                item = exc.detached()           # see common.RowError
            else:
                cases.append(item[0])
            built.append(item)
        results = iter(self.judge_cases(cases, context) if cases else ())
        out = []
        for row, item in zip(rows, built):
            if isinstance(item, common.RowError):
                out.append(item)
                continue
            try:
                out.append(self.record_fields(row, item, next(results), context))
            except common.RowError as exc:
                out.append(exc.detached())
        return out

    def judge_cases(self, cases, context):
        """Results of the route-eval check for every case, in order."""
        from general_llm.service_client import ServiceUnavailable
        policy = "mark" if context.options.allow_service_errors else "raise"
        try:
            return self.judge.evaluate(cases, on_batch_failure=policy)
        except ServiceUnavailable as exc:
            raise transitlm.io.exit_status.ServiceError(
                "%s\n(no figures were computed; --allow_service_errors counts the cases of "
                "failed requests as unreachable instead)" % exc)

    def record_fields(self, row, item, result, context):
        protocol = context.protocol
        case, pred, label, names, label_names = item
        service_failure = bool(result.get("service_failure"))
        if service_failure:
            context.count("service_errors")
        elif result.get("error"):
            raise common.RowError("route-eval: %s" % result["error"], "route_eval")
        reachable = bool(result.get("reachable")) and not service_failure
        grounded = bool(result.get("station_grounding"))
        if service_failure:
            reach_codes = ("service_unavailable",)
        else:
            reach_codes = (result.get("reachable_code") or "route_eval",)
        fields = {"reachable": reachable,
                  "reachable_reason": result.get("reachable_reason", ""),
                  "station_grounding": grounded,
                  "station_grounding_reason": result.get("station_grounding_reason", ""),
                  "match_details": result.get("match_details", []),
                  "boarding_alighting_names": names,
                  "_codes": {"reachability": reach_codes,
                             "grounding": tuple(result.get("station_grounding_codes")
                                                or ("route_eval",))}}
        if context.route_drawings:
            fields["prediction_routes"] = {"first": common.route_json(pred, names)}
            fields["label_routes"] = {"first": common.route_json(label, label_names)}
            # The page's map of a route the check stopped on: every predicted
            # name found on the predicted lines (in-process: the line table).
            if not reachable and isinstance(self.judge, LocalRouteEval):
                fields["names_on_lines"] = route_eval.names_on_lines(case, self.judge.lines)
        plausibility = self.plausibility(row, pred, fields, context)
        fields["distance_plausibility"] = plausibility.ok
        fields["distance_plausibility_reason"] = plausibility.reason
        fields["_codes"]["plausibility"] = plausibility.codes
        fields.update(common.compare_routes(pred, label, protocol, names=stripped_names,
                                            station_sets=(names, label_names)))
        return fields

    def plausibility(self, row, pred, fields, context):
        """DP: the published service has none (always passes); the paper checks the
        access distances against the matched first boarding / last alighting stops."""
        if not context.protocol.general_dp_checked:
            return common.Verdict(True, "not checked by the route-eval service")
        details = fields["match_details"]
        if not fields["reachable"] or not details:
            return common.Verdict(True, "not checked: route unreachable")
        verdicts = []
        for side, point, stop, access_km in (
                ("origin", row.origin, details[0].get("boarding_stop_id"), pred.start_access_km),
                ("destination", row.destination, details[-1].get("alighting_stop_id"),
                 pred.end_access_km)):
            stop_point = stop_coords(context.network, stop)
            if stop_point is None:
                verdicts.append(common.Verdict(True, "%s stop has no coordinates" % side))
                continue
            straight = common.haversine_km(point[0], point[1], stop_point[0], stop_point[1])
            verdicts.append(common.check_access_distance(side, straight, access_km,
                                                         context.protocol))
        return common.combine(verdicts, "access distances plausible")

    def can_run_in_workers(self, context):
        # A service is asked batch by batch from one process: its own limits apply.
        return context.options.api_url is None


def stop_coords(network, stop):
    """Coordinates of a matched stop, looked up as is or with the `bus-` prefix."""
    if not stop:
        return None
    point = network.coords(stop)
    if point is None:
        point = network.coords(common.BUS_STOP_PREFIX + stop)
    return point


if __name__ == "__main__":
    transitlm.cli.script_main(GeneralLLM())

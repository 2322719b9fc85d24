"""The system prompt of a benchmark file: what the model is told about the
answer's format (the release's files carry one per row, column
``system_prompt``; generate.py sends it as the system message).

Used by make_benchmark.py for the files it builds and by make_demo.py for the
bundled examples, so a model run on either knows the answer format, and by
harness.py lm-eval and ``reward.py prepare`` for a test or training file
without the column (``benchmark_system_prompt``: the release's queries are
Chinese).  The texts are data (Chinese and English), kept here as named
constants.

Standard library only; Python 3.8+.
"""

from transitlm.evaluation.catalog import benchmark_info

ROUTE_FIELDS = {
    "zh": ('{"line_sequence": [线路全名, ...], "station_sequence": [%s, ..., "【换乘】", ...], '
           '"total_distance": "12.3公里", "total_time": "45分钟", "total_fare": "4", '
           '"start_transfer_mode": "步行|骑行|打车", "end_transfer_mode": "步行|骑行|打车", '
           '"start_transfer_distance": "500米", "end_transfer_distance": "1.2公里"}'),
    "en": ('{"line_sequence": [full line names, ...], "station_sequence": [%s, ..., "【换乘】", ...], '
           '"total_distance": "12.3公里", "total_time": "45分钟", "total_fare": "4", '
           '"start_transfer_mode": "walk|bike|taxi", "end_transfer_mode": "walk|bike|taxi", '
           '"start_transfer_distance": "500米", "end_transfer_distance": "1.2公里"}'),
}
STATION_WORDS = {"zh": ("站点ID", "站点名称"), "en": ("stop ids", "station names")}
SYSTEM_PROMPT = {
    "zh": ("你是公共交通出行规划助手。根据用户给出的起点、终点坐标（经度,纬度）和城市，规划一条公共交通路线{extra}。"
           "只输出一个JSON对象，不要输出其他文字，格式：{format}。"
           "换乘处在station_sequence中插入\"【换乘】\"，距离用公里或米，时间用分钟或小时，票价用元。"),
    "en": ("You are a public transport trip planner. Given the user's origin and destination "
           "coordinates (longitude,latitude) and city, plan a public transport route{extra}. "
           "Output one JSON object and nothing else, in this format: {format}. "
           "Mark each transfer with \"【换乘】\" in station_sequence; write distances in 公里 or 米, "
           "times in 分钟 or 小时, fares in 元."),
}
EXTRA = {
    "zh": {"b1": "", "b2": "，并满足用户的出行偏好", "b3": "，给出三条不同的方案（first、second、third）",
           "general": ""},
    "en": {"b1": "", "b2": " that honours the user's preference",
           "b3": ", giving three different options (first, second, third)", "general": ""},
}


def system_prompt(kind, lang):
    """The system prompt of benchmark ``kind`` (b1, b2, b3, general) in
    ``lang`` (zh, en): the task and the answer's JSON format."""
    words = STATION_WORDS[lang][1 if kind == "general" else 0]
    route_format = ROUTE_FIELDS[lang] % words
    if kind == "b3":
        route_format = '{"first": %s, "second": {...}, "third": {...}} (each with "route_tag")' % route_format
    return SYSTEM_PROMPT[lang].format(extra=EXTRA[lang][kind], format=route_format)


# The release's queries are Chinese: a file without system prompts gets these.
DEFAULT_LANGUAGE = "zh"


def benchmark_system_prompt(benchmark, lang=DEFAULT_LANGUAGE):
    """The system prompt of a benchmark by its evaluator's name (single_route,
    personalized, diversity, general_llm): its kind is its task id in the
    catalogue ("1" -> b1, ..., "general")."""
    task_id = benchmark_info(benchmark).task_id
    return system_prompt("b" + task_id if task_id.isdigit() else task_id, lang)

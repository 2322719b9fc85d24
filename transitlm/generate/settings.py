"""What shaped generate.py's answers: the settings sidecar of an output file.

``generate.py --out P`` records, in ``P.settings.json`` (the name
``transitlm.io.files.settings_path`` gives; the evaluators copy it into
their run folder's run.json), the settings that shape an answer:

    {"settings_schema": 1, "tool": "generate.py", "version": "1.6.1",
     "model": "qwen2.5-7b", "api_url": "http://127.0.0.1:8000/v1",
     "system_prompt_sha256": null, "temperature": 0.0, "top_p": null,
     "max_tokens": null, "extra_body": {}, "input_sha256": "9f2c...",
     "prompt": {"source": "column", "sha256": "ab12..."}}

``api_url`` is the base URL without user info, query or fragment (never a
key), ``system_prompt_sha256`` the SHA-256 of --system_prompt_file's text
(null: the input's system_prompt column, covered by ``input_sha256``),
``prompt`` what the rows are sent as their system prompt (transitlm.evaluation.chat_messages:
``{"source": "column" | "file" | "default" | "column+default", "sha256"}``;
the evaluators copy it into report.json and name it in the signature),
``extra_body`` the fields merged into every request (--extra_body, and
--no_thinking's ``chat_template_kwargs``).  After a run that wrote lines,
``output`` says what the output holds (``runner.output_summary``: answered,
failed, empty and cut answers, the model names the server reported).  The
file is deterministic (no time in it), strict JSON (no NaN: one is refused
when read back) and written through a temporary file and a rename.  A run
onto an existing output compares every field of ``COMPARED``;
``differences`` says which differ.

Standard library only; Python 3.8+.
"""

import hashlib
import json
import urllib.parse

from transitlm.io.bounded_json import loads_bounded
from transitlm.io.files import settings_path, write_whole
from transitlm.evaluation.provenance import MAX_SETTINGS_BYTES

SETTINGS_SCHEMA = 1
TOOL = "generate.py"
# The fields that shape an answer, in the order a difference is named.
COMPARED = ("model", "api_url", "system_prompt_sha256", "prompt", "temperature", "top_p",
            "max_tokens", "extra_body", "input_sha256", "version")
SHOWN_CHARS = 60               # of a value quoted in a difference


class SettingsFileError(Exception):
    """A sidecar that cannot be read as generate.py's settings (one line)."""


def base_url(api_url):
    """The API base URL as recorded: no user info, query or fragment, no
    trailing slash or /chat/completions, scheme and host in lower case."""
    text = (api_url or "").strip()
    try:
        parts = urllib.parse.urlsplit(text)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return text.split("@")[-1].split("?")[0].split("#")[0]
    if ":" in host:
        host = "[%s]" % host
    netloc = host if port is None else "%s:%d" % (host, port)
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        path = path[:-len("/chat/completions")]
    return urllib.parse.urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def text_sha256(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def settings_record(model, api_url, system_prompt, temperature, top_p, max_tokens,
                    extra_body, input_sha256, version, prompt=None):
    """The sidecar's object for one command (``system_prompt``: the text of
    --system_prompt_file, or None; ``prompt``: the record of the system
    prompts the input's rows are sent, transitlm.evaluation.chat_messages)."""
    return {"settings_schema": SETTINGS_SCHEMA, "tool": TOOL, "version": version,
            "model": model, "api_url": base_url(api_url),
            "system_prompt_sha256": None if system_prompt is None
            else text_sha256(system_prompt),
            "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens,
            "extra_body": extra_body or {}, "input_sha256": input_sha256, "prompt": prompt}


def settings_text(record):
    return json.dumps(record, ensure_ascii=True, indent=1, sort_keys=True,
                      allow_nan=False) + "\n"


def read_settings(out_path):
    """The sidecar of ``out_path`` -> (dict, its bytes), or (None, None) when
    there is none; SettingsFileError when it is not a JSON object of at most
    MAX_SETTINGS_BYTES."""
    path = settings_path(out_path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise SettingsFileError("cannot read %s: %s" % (path, exc.strerror or exc))
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsFileError("%s is larger than %d bytes: not a settings file of "
                                "generate.py" % (path, MAX_SETTINGS_BYTES))
    try:
        value = loads_bounded(data, strict=True)
    except ValueError as exc:
        raise SettingsFileError("%s is not a settings file of generate.py (%s)" % (path, exc))
    if not isinstance(value, dict):
        raise SettingsFileError("%s is not a settings file of generate.py (not a JSON object)"
                                % path)
    return value, data


def _canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def _shown(value):
    text = _canonical(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def differences(recorded, current):
    """The fields of COMPARED whose values differ -> list of text such as
    ``model "a" (now "b")``; a field the file lacks shows as ``(none)``."""
    found = []
    for key in COMPARED:
        now = current.get(key)
        if key not in recorded:
            found.append("%s (none) (now %s)" % (key, _shown(now)))
        elif _canonical(recorded[key]) != _canonical(now):
            found.append("%s %s (now %s)" % (key, _shown(recorded[key]), _shown(now)))
    return found


def write_settings(out_path, record, output=None):
    """Write the sidecar whole (transitlm.io.files.OutputFile), with ``output``
    (what the output file holds) when given."""
    if output is not None:
        record = dict(record, output=output)
    write_whole(settings_path(out_path), settings_text(record))

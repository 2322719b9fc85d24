"""Writing the release folder (issue 45, points 1, 5 and 7): what --out may
hold, the leftovers a stopped run leaves, corpus parts renamed into place
whole, the network and vocabulary files, and dataset.json.

Every file appears under its final name only when complete: it is written
as a dot-file (transitlm.io.files.TEMP_PREFIX) beside its place and renamed.
A corpus part is renamed as soon as it is complete, so a stopped run keeps
the parts it finished and a rerun of the same command builds only the
others; the other files are committed together at the end of a run.  Runs
of different --parts ranges may share one folder at the same time (each
removes only its own parts' leftovers); a run without --parts must not run
beside them (it removes every leftover).

Standard library only; Python 3.8+.
"""

import csv
import hashlib
import io
import json
import os
import stat
import tempfile

from common import LINE_COLUMNS, STATION_FILE_COLUMNS, VERSION, InputError
from transitlm.io.exit_status import signals_held
from transitlm.io.files import TEMP_PREFIX, write_csv
from transitlm.datasets import release_names as names

csv.field_size_limit(2 ** 31 - 1)

READ_CHUNK = 1 << 20
MANIFEST_BYTES = 64 << 20


def out_problem(out):
    """Why --out cannot be a release folder at all (it is a file, a device),
    or None; a missing folder is made."""
    if not os.path.lexists(out):
        return None
    try:
        mode = os.stat(out).st_mode
    except OSError as exc:
        return "--out %s cannot be read: %s" % (out, exc.strerror or exc)
    if not stat.S_ISDIR(mode):
        return "--out %s is not a folder" % out
    return None


def read_manifest(out):
    """dataset.json of --out as a dict; None when there is none; InputError
    when it is not a release's manifest."""
    path = os.path.join(out, names.MANIFEST)
    if not os.path.lexists(path):
        return None
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MANIFEST_BYTES:
            raise ValueError("not a small regular file")
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError("--out %s holds a %s that is not a dataset's manifest (%s): give an "
                         "empty or new folder" % (out, names.MANIFEST, exc))
    if not isinstance(manifest, dict) or manifest.get(names.MANIFEST_MARKER) != names.MANIFEST_SCHEMA:
        raise InputError("--out %s holds a %s that is not a make_dataset.py manifest: give an "
                         "empty or new folder" % (out, names.MANIFEST))
    return manifest


def settings_difference(manifest, settings):
    """The first setting (or the version) in which an existing manifest differs
    from this run's, as "seed 1, not 2", or None."""
    if manifest.get("version") != VERSION:
        return "version %s, not %s" % (manifest.get("version"), VERSION)
    theirs = manifest.get("settings") or {}
    for key in sorted(set(theirs) | set(settings)):
        if theirs.get(key) != settings.get(key):
            shown = lambda v: "other networks" if key == "networks" else json.dumps(v)
            return "%s %s, not %s" % (key, shown(theirs.get(key)), shown(settings.get(key)))
    return None


def is_temporary(name):
    return name.startswith(TEMP_PREFIX)


def check_contents(out, part_count, settings):
    """Refuse an --out holding anything but this dataset (InputError): other
    files, another dataset's manifest, release files without a manifest, a
    part outside the plan.  Temporaries (dot-files) are leftovers."""
    if not os.path.isdir(out):
        return
    manifest = read_manifest(out)
    try:
        entries = sorted(os.listdir(out))
    except OSError as exc:
        raise InputError("cannot read --out %s: %s" % (out, exc.strerror or exc))
    allowed = names.top_level_names()
    for name in entries:
        if not is_temporary(name) and name not in allowed:
            raise InputError("--out %s holds other files (%s): give an empty or new folder, or "
                             "the folder of this dataset" % (out, name))
    kept = [n for n in entries if not is_temporary(n)]
    if manifest is None:
        if kept:
            raise InputError("--out %s holds %s but no %s: give an empty or new folder"
                             % (out, kept[0], names.MANIFEST))
        return
    difference = settings_difference(manifest, settings)
    if difference:
        raise InputError("--out %s holds another dataset (%s): give a new folder, or the same "
                         "settings" % (out, difference))
    wanted = {names.CORPUS_FOLDER: {names.CORPUS_PART % k for k in range(1, part_count + 1)},
              names.SFT_FOLDER: {os.path.basename(names.sft_jsonl(n, s))
                                 for _, n in names.TASKS for s in names.SPLITS}}
    for folder, allowed_files in wanted.items():
        path = os.path.join(out, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if not is_temporary(name) and name not in allowed_files:
                raise InputError("--out %s holds %s/%s, which this dataset does not have (the "
                                 "plan has %d parts)" % (out, folder, name, part_count))


def part_temp_prefix(number):
    """The temporaries of corpus part ``number``: .transitlm-part003-..."""
    return "%spart%03d-" % (TEMP_PREFIX, number)


def is_holdout_cache(name):
    return name.startswith(names.HOLDOUT_CACHE_PREFIX) and name.endswith(".json")


def remove_leftovers(out, parts=None):
    """Remove the temporaries a stopped run left -> count.  A whole run removes
    every one in --out and its folders (not the hold-out cache, below, which
    it removes once complete); a --parts A-B run only those of its own parts, so runs of
    other ranges into the same folder go on undisturbed."""
    removed = 0
    if parts is None:
        folders = (out, os.path.join(out, names.CORPUS_FOLDER), os.path.join(out, names.SFT_FOLDER))
        mine = lambda name: is_temporary(name) and not is_holdout_cache(name)
    else:
        folders = (os.path.join(out, names.CORPUS_FOLDER),)
        prefixes = tuple(part_temp_prefix(k) for k in range(parts[0], parts[1] + 1))
        mine = lambda name: name.startswith(prefixes)
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if mine(name):
                try:
                    os.remove(os.path.join(folder, name))
                    removed += 1
                except OSError:
                    pass
    return removed


# ---------------------------------------------------------------------------
# The hold-out cache of --parts runs
# ---------------------------------------------------------------------------
#
# A --parts run needs the test trips to hold them out of its parts, and they
# are drawn by drawing the four test files: minutes of CPU at the release's
# sizes, for every --parts run (every Ray task).  The first such run of a
# folder leaves them in a dot-file named for the settings' key; later --parts
# runs with the same settings and version read them instead of drawing.  The
# run that completes the folder draws the test files itself (it writes them),
# audits every part against its own hold-out -- so a cache that lied would be
# caught there -- and removes the cache.

def holdout_key(settings):
    """The key of a hold-out: the version and every setting (networks included)."""
    text = json.dumps({"version": VERSION, "settings": settings}, sort_keys=True,
                      ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def read_holdout_cache(out, key):
    """The hold-out entries ([(pair, origin, dest)]) a --parts run of these
    settings left in ``out``, or None (none there, another key, unreadable)."""
    path = os.path.join(out, names.HOLDOUT_CACHE % key[:32])
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("key") != key:
            return None
        entries = []
        for (a, b), origin, dest in data["entries"]:
            entries.append(((str(a), str(b)), (float(origin[0]), float(origin[1])),
                            (float(dest[0]), float(dest[1]))))
        return entries
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def write_holdout_cache(out, key, entries):
    """Leave the hold-out entries for later --parts runs (written beside, then
    renamed: a reader sees the whole file or none).  A failure to write is
    not an error: the cache only saves time."""
    path = os.path.join(out, names.HOLDOUT_CACHE % key[:32])
    data = json.dumps({"key": key, "entries": [[list(pair), list(origin), list(dest)]
                                               for pair, origin, dest in entries]})
    try:
        handle, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=out)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except OSError:
        pass


def remove_holdout_caches(out):
    """The completed folder keeps no hold-out cache."""
    try:
        found = [n for n in os.listdir(out) if is_holdout_cache(n)]
    except OSError:
        return
    for name in found:
        try:
            os.remove(os.path.join(out, name))
        except OSError:
            pass


class PartWriter(object):
    """One corpus part: CSV text into a dot-file beside it (named for the
    part), hashed as it is written, renamed into place by commit(); discard()
    removes it.  ``sha256`` is the digest of the bytes written."""

    def __init__(self, path, number):
        self.path = path
        try:
            handle, self.temp = tempfile.mkstemp(prefix=part_temp_prefix(number), suffix=".tmp",
                                                 dir=os.path.dirname(path))
            self.file = os.fdopen(handle, "wb")
        except OSError as exc:
            raise InputError("cannot write %s: %s" % (path, exc.strerror or exc))
        self.digest = hashlib.sha256()
        self.rows = 0
        self.write(csv_text([names.CORPUS_COLUMNS]), 1)

    def write(self, text, count):
        """``text``: ``count`` rows of CSV (csv_text)."""
        data = text.encode("utf-8")
        try:
            self.file.write(data)
        except OSError as exc:
            raise InputError("cannot write %s: %s" % (self.path, exc.strerror or exc))
        self.digest.update(data)
        self.rows += count

    @property
    def sha256(self):
        return self.digest.hexdigest()

    def commit(self):
        try:
            self.file.close()
            os.chmod(self.temp, 0o644)
            with signals_held():
                os.replace(self.temp, self.path)
        except OSError as exc:
            self.discard()
            raise InputError("cannot write %s: %s" % (self.path, exc.strerror or exc))

    def discard(self):
        try:
            self.file.close()
        except (OSError, ValueError):
            pass
        try:
            os.remove(self.temp)
        except OSError:
            pass


def csv_text(rows):
    """Rows as the corpus parts hold them: CSV in the csv module's default
    dialect (every line ending in \\r\\n), one string."""
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    return text.getvalue()


def file_digest(path):
    """(SHA-256, bytes) of a file."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def read_csv_rows(path):
    """The rows of a CSV file the release wrote, as lists (header first), streamed."""
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle):
            yield row


def network_rows(folders, filename, columns):
    """The rows of one network file of every network, in network order, as lists
    in ``columns`` order (the files' own layout)."""
    for folder in folders:
        with open(os.path.join(folder, filename), encoding="utf-8-sig", newline="") as handle:
            for row in csv.DictReader(handle, restval=""):
                yield [row.get(c, "") for c in columns]


def write_network_files(files, out, folders, nets):
    """The station and line files of every network, and the station-id vocabulary."""
    write_csv(files.open(os.path.join(out, names.STATION_INFO), newline=""),
              list(STATION_FILE_COLUMNS), network_rows(folders, "station_info.csv",
                                                      STATION_FILE_COLUMNS))
    write_csv(files.open(os.path.join(out, names.LINE_INFO), newline=""),
              list(LINE_COLUMNS), network_rows(folders, "line_info.csv", LINE_COLUMNS))
    ids = [stop_id for net in nets for stop_id in net.ids]
    files.write(os.path.join(out, names.STATION_IDS),
                json.dumps(ids, ensure_ascii=False, indent=0) + "\n")
    return len(ids)


def station_collision(nets, folders):
    """The first stop id two networks share, as a line naming the fix, or None
    (the same network given twice is named as such)."""
    seen = {}
    for k, net in enumerate(nets):
        first = seen.setdefault(net.identity, k)
        if first != k:
            return ("--network %s and %s are the same network (the same files): give each "
                    "network once" % (folders[first], folders[k]))
    owner = {}
    for k, net in enumerate(nets):
        for stop_id in net.ids:
            first = owner.setdefault(stop_id, k)
            if first != k:
                return ("stop id %s is in both %s and %s: import one of the feeds again with "
                        "data/import_gtfs.py --id_prefix P so the ids differ"
                        % (stop_id, folders[first], folders[k]))
    return None


def adcode_collision(nets, folders):
    """The first ad_code two networks share, as a line naming --adcode, or None."""
    owner = {}
    for k, net in enumerate(nets):
        for district in net.districts:
            first = owner.setdefault(district.city.code, k)
            if first != k:
                return ("ad_code %s is in both %s and %s: import one of the feeds again with "
                        "data/import_gtfs.py --adcode CODE (a code of its own)"
                        % (district.city.code, folders[first], folders[k]))
    return None


def manifest_text(manifest):
    return json.dumps(manifest, ensure_ascii=False, indent=1) + "\n"

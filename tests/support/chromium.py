"""Chromium, headless: the browser checks skip where it is not installed, except under CI (CI=true), where a missing browser fails."""

import hashlib
import html.parser
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from tests.support.synthetic_runs import digest


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
BROWSER_TIMEOUT_S = 120


def in_ci():
    """Is CI set (CI=true, as CI services and .ci/run set it)?"""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_installed(program, checks, package):
    """From a test class's setUpClass: skip it where ``program`` (a path or
    None) is not installed -- on a developer's machine -- but fail under CI,
    so that a broken install is noticed."""
    if program:
        return
    if in_ci():
        raise AssertionError("%s are not possible here and CI is set: they must run (.ci/run "
                             "installs Debian's %s)" % (checks, package))
    raise unittest.SkipTest("%s skipped: not installed (Debian: apt-get install %s)"
                            % (checks, package))


def chromium_command(url, user_dir, *flags):
    return ([CHROMIUM] + list(CHROMIUM_FLAGS) + ["--user-data-dir=" + user_dir]
            + list(flags) + [url])


def with_script(page, script):
    """A page's HTML with ``script`` run after the page's own: added at the
    end of its body and allowed, by its SHA-256, in the page's
    Content-Security-Policy (which allows no other inline script)."""
    import base64
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    if "script-src " not in page:
        raise AssertionError("the page has no script-src in a Content-Security-Policy")
    page = page.replace("script-src ", "script-src 'sha256-%s' " % digest, 1)
    return page.replace("</body>", "<script>%s</script></body>" % script, 1)


# A page of frames: once everything has loaded it copies the attributes of
# each framed page's <body> (where a checking script left its findings) into
# its own <body>, which --dump-dom prints.  Frames of file:// pages can be
# read with --allow-file-access-from-files.
_FRAMES_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>%s<script>
window.addEventListener('load',function(){var out={};
[].forEach.call(document.querySelectorAll('iframe'),function(f){var found={};
 try{[].forEach.call(f.contentDocument.body.attributes,function(a){found[a.name]=a.value;});}
 catch(e){found=null;}
 out[f.id]=found;});
document.body.setAttribute('data-frames',JSON.stringify(out));});
</script></body></html>"""


def frames_command(folder, frames, height=700):
    """One headless Chromium run that opens pages of ``folder`` side by side,
    each in a frame of its own width: frames = [(id, file name, width)] ->
    the command (run it, then read its output with frames_found)."""
    path = os.path.join(folder, "frames.html")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(_FRAMES_PAGE % "".join(
            '<iframe id="%s" src="%s" width="%d" height="%d"></iframe>'
            % (ident, name, width, height) for ident, name, width in frames))
    profile = tempfile.mkdtemp(dir=folder)
    return chromium_command("file://" + path, profile, "--dump-dom",
                            "--allow-file-access-from-files", "--hide-scrollbars")


def frames_found(dom, log=""):
    """{frame id: {attribute of its page's <body>: value}} from the DOM that
    frames_command's run printed (None for a frame that could not be read)."""
    found = re.search(r'data-frames="([^"]*)"', dom)
    if not found:
        raise AssertionError("no findings from Chromium: %s" % log[-800:])
    return json.loads(html.unescape(found.group(1)))


def run_frames(folder, frames, height=700):
    """frames_command run -> frames_found."""
    done = subprocess.run(frames_command(folder, frames, height), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=BROWSER_TIMEOUT_S)
    return frames_found(done.stdout.decode("utf-8", "replace"),
                        done.stderr.decode("utf-8", "replace"))

"""The HTML report in a real browser: headless Chromium renders the page of each
benchmark to a PNG that is not blank, and the page's script runs without a
JavaScript error.  Skips where Chromium is not installed
(Debian: apt-get install chromium)."""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

from tests import test_html

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
BROWSER_TIMEOUT_S = 120


def run_chromium(url, user_dir, *flags):
    """Run headless Chromium on a file URL -> (stdout, stderr)."""
    done = subprocess.run([CHROMIUM] + list(CHROMIUM_FLAGS) + ["--user-data-dir=" + user_dir]
                          + list(flags) + [url], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=BROWSER_TIMEOUT_S)
    return (done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


def png_top_pixels(path, max_rows=400):
    """Decode the top rows of an 8-bit RGB/RGBA PNG -> (width, rows of pixel tuples)."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    offset, idat, header = 8, [], None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        offset += 12 + length
    width, height, depth, colour_type = header[:4]
    if depth != 8 or colour_type not in (2, 6):
        raise ValueError("unsupported PNG layout")
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    rows_wanted = min(height, max_rows)
    raw = zlib.decompressobj().decompress(b"".join(idat), (stride + 1) * rows_wanted)
    previous = bytearray(stride)
    rows = []
    for index in range(rows_wanted):
        start = index * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        unfilter(kind, line, previous, channels)
        rows.append([tuple(line[i:i + channels]) for i in range(0, stride, channels)])
        previous = line
    return width, rows


def unfilter(kind, line, previous, bpp):
    """Undo one PNG scanline filter in place (types 0-4)."""
    if kind == 0:
        return
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
        elif kind == 4:
            upper_left = previous[i - bpp] if i >= bpp else 0
            estimate = left + up - upper_left
            pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - upper_left)
            if pa <= pb and pa <= pc:
                predictor = left
            elif pb <= pc:
                predictor = up
            else:
                predictor = upper_left
            line[i] = (line[i] + predictor) & 0xFF
        else:
            raise ValueError("bad PNG filter %d" % kind)


def page_of(benchmark, folder):
    """The report.html an evaluator writes into its run folder (bundled example)."""
    out = os.path.join(folder, "run_" + benchmark)
    subprocess.run([sys.executable, os.path.join(REPO, benchmark, "evaluate.py"),
                    "--quiet", "--out", out], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return os.path.join(out, "report.html")


@unittest.skipUnless(CHROMIUM, "Chromium is not installed (Debian: apt-get install chromium)")
class BrowserTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="html_browser_")
        self.addCleanup(shutil.rmtree, self.folder, True)

    def test_pages_render_without_errors(self):
        for benchmark in test_html.EVALUATORS:
            with self.subTest(benchmark=benchmark):
                path = page_of(benchmark, self.folder)
                url = "file://" + path
                png = os.path.join(self.folder, benchmark + ".png")
                profile = tempfile.mkdtemp(dir=self.folder)
                _, log = run_chromium(url, profile, "--screenshot=" + png,
                                      "--window-size=1280,1400", "--enable-logging=stderr",
                                      "--v=0")
                self.assertTrue(os.path.exists(png), "no screenshot: " + log[-500:])
                width, rows = png_top_pixels(png)
                pixels = [pixel[:3] for row in rows for pixel in row]
                background = max(set(pixels[:5000]), key=pixels[:5000].count)
                inked = sum(1 for pixel in pixels if pixel != background)
                self.assertGreater(len(set(pixels)), 20, "screenshot is nearly uniform")
                self.assertGreater(inked / float(len(pixels)), 0.01, "screenshot is blank")
                self.assertNotIn("Uncaught", log)
                dom, _ = run_chromium(url, tempfile.mkdtemp(dir=self.folder), "--dump-dom")
                body = re.search(r"<body[^>]*>", dom)
                body = body.group() if body else "(no body in the DOM)"
                self.assertTrue('data-ready="1"' in body and "data-js-error" not in body,
                                "the page's script did not finish: " + body[:300])


class PngDecoderTest(unittest.TestCase):
    """The decoder the browser test relies on, on hand-built PNGs."""

    def make_png(self, rows, filter_kind):
        width = len(rows[0])
        raw = b""
        previous = bytearray(width * 3)
        for row in rows:
            line = bytearray(b"".join(bytes(pixel) for pixel in row))
            if filter_kind == 2:
                encoded = bytearray((line[i] - previous[i]) & 0xFF for i in range(len(line)))
            else:
                encoded = line
            raw += bytes([filter_kind]) + bytes(encoded)
            previous = line

        def chunk(kind, body):
            return (struct.pack(">I", len(body)) + kind + body
                    + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
        return (b"\x89PNG\r\n\x1a\n"
                + chunk(b"IHDR", struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

    def test_decodes_none_and_up_filters(self):
        rows = [[(255, 255, 255), (0, 0, 0)], [(10, 20, 30), (255, 255, 255)]]
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder, True)
        for kind in (0, 2):
            path = os.path.join(folder, "t%d.png" % kind)
            with open(path, "wb") as handle:
                handle.write(self.make_png(rows, kind))
            width, decoded = png_top_pixels(path)
            self.assertEqual((width, decoded), (2, rows))

    def test_paeth_and_average(self):
        line = bytearray([5, 5, 5])
        unfilter(3, line, bytearray([10, 10, 10]), 3)       # + (0 + 10) // 2
        self.assertEqual(list(line), [10, 10, 10])
        line = bytearray([1, 1, 1])
        unfilter(4, line, bytearray([7, 8, 9]), 3)          # Paeth with no left: up
        self.assertEqual(list(line), [8, 9, 10])


if __name__ == "__main__":
    unittest.main()

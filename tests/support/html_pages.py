"""HTML pages read by the tests: a small parser collecting what the tests look at."""

import html.parser
import re


class PageParser(html.parser.HTMLParser):
    def __init__(self):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.references = []          # values of src / href attributes
        self.styles = []              # <style> texts and style attributes
        self.maps = 0                 # <svg class="map">
        self.listed_rows = 0          # <tbody class="r">
        self.tables = {}              # table id -> rows of cell texts
        self.metrics = {}             # data-metric -> value text
        self.script_types = []
        self._stack = []
        self._table = None
        self._cell = None
        self._metric = None
        self._in_mval = False
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href", "xlink:href", "action", "data"):
            if attrs.get(name):
                self.references.append(attrs[name])
        if attrs.get("style"):
            self.styles.append(attrs["style"])
        classes = (attrs.get("class") or "").split()
        if tag == "svg" and "map" in classes:
            self.maps += 1
        if tag == "tbody" and "r" in classes:
            self.listed_rows += 1
        if tag == "table" and attrs.get("id"):
            self._table = attrs["id"]
            self.tables[self._table] = []
        if tag == "tr" and self._table:
            self.tables[self._table].append([])
        if tag in ("td", "th") and self._table:
            self._cell = []
        if attrs.get("data-metric"):
            self._metric = attrs["data-metric"]
        if "mval" in classes:
            self._in_mval = True
        if tag == "style":
            self._in_style = True
        if tag == "script":
            self.script_types.append(attrs.get("type", ""))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        if tag == "table":
            self._table = None
        if tag == "div" and self._in_mval:
            self._in_mval = False
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_mval and self._metric:
            self.metrics[self._metric] = data.strip()
        if self._in_style:
            self.styles.append(data)


def parse_page(text):
    parser = PageParser()
    parser.feed(text)
    parser.close()
    return parser


def external_references(parser):
    """Every http(s) reference in src/href attributes or CSS url()."""
    found = [ref for ref in parser.references if re.match(r"\s*(https?:)?//", ref, re.I)]
    for style in parser.styles:
        for url in re.findall(r"url\(\s*['\"]?([^'\")]*)", style, re.I):
            if re.match(r"\s*(https?:)?//", url, re.I):
                found.append(url)
    return found

"""The comparison pages tests/test_compare_page_browser.py checks, rendered in
headless Chromium: compare.py's pages of runs with long names, with a probe
script -> what the probe found per page and width.  Made in a process of its
own while the suite goes on (tests.support.Offloaded: the page making runs
compare in-process, and capturing its output is no business for a thread)."""

import os

from tests.support.chromium import run_frames, with_script
from tests.support.synthetic_runs import benchmark_records, run_compare, write_run

WIDTHS = (900, 1280)

# Appended to a copy of the page, after its own script (allowed by hash):
# measures the laid-out page and writes what it found into attributes of
# <body>.  An element inside a table's scrolling box may reach past the
# window; the box itself may not.
PROBE = """
(function(){
var width=document.documentElement.clientWidth,over=[],all=document.querySelectorAll('body *');
for(var i=0;i<all.length;i++){var r=all[i].getBoundingClientRect(),
 box=all[i].parentElement&&all[i].parentElement.closest('.tbox');
 if(r.width&&r.right>width+0.5&&!box)over.push(all[i].tagName+'.'+all[i].getAttribute('class'));}
var b=document.body;
b.setAttribute('data-over',String(over.length));
b.setAttribute('data-over-what',over.slice(0,5).join(' '));
b.setAttribute('data-scroll',document.documentElement.scrollWidth+'/'+width);
var text=b.innerText;
var json=text.match(/[{\\[]\\s*"|"\\s*:\\s*[\\[{"0-9]|\\{\\}|\\[\\]/);
b.setAttribute('data-json',json?json[0]+' near '+text.substr(Math.max(0,json.index-40),80):'no');
var w=document.querySelector('path.whisker');
b.setAttribute('data-whisker',w?getComputedStyle(w).stroke+' '+getComputedStyle(w).strokeWidth:'none');
})();
"""


def render_comparisons(folder):
    """The pages made in ``folder`` and rendered -> {"<page>@<width>": the
    probe's attributes of <body>}."""
    long_folder = "a-folder-name-that-goes-on-" + "x" * 120
    runs = []
    for benchmark in ("single_route", "personalized", "diversity"):
        for model, quality in (("qwen2.5-7b-instruct-with-a-rather-long-model-name-"
                                + "y" * 60, 0.4), ("llama", 0.9)):
            records = benchmark_records(benchmark, 60, quality, seed=len(model),
                                        cities=("北京", "Shenzhen", "z" * 90))
            for record in records:
                if record["failure_codes"]:
                    record["failure_codes"].append("overlap." + "w" * 100)
            runs.append(write_run(
                os.path.join(folder, long_folder, "%s-%s" % (model[:5], benchmark)),
                records, benchmark, model=model))
    frames = []
    for name, argv in (("several", runs), ("one", runs[:2])):
        page = os.path.join(folder, name + ".html")
        status, _, err = run_compare(list(argv) + ["--html", page, "--bootstrap", "100",
                                                   "--by", "city", "--by", "failure"])
        assert status == 0, err
        with open(page, encoding="utf-8") as handle:
            html = handle.read()
        with open(os.path.join(folder, name + "-probe.html"), "w",
                  encoding="utf-8") as handle:
            handle.write(with_script(html, PROBE))
        frames += [("%s@%d" % (name, width), name + "-probe.html", width)
                   for width in WIDTHS]
    return run_frames(folder, frames, height=1000)

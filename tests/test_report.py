"""`perfmodel report` (issue 15, item 5): one self-contained HTML file (no script, no network, no
external asset) with the plan, the best configurations, the breakdown, memory against capacity, the
Gantt chart, the Pareto scatter and the findings; and it renders in a real browser (headless
Chromium, when installed).
"""

import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.units import fmt_time

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Parsed(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.refs, self.h2, self._in_h2 = [], [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href", "xlink:href", "data") and v]
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data)
            self._in_h2 = False


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    r = CliRunner().invoke(main, ["report", "gpt3-175b.yaml", "--gpus", "512", "-o", str(out)])
    assert r.exit_code == 0 and f"wrote {out}" in r.stderr, r.output
    return out


def test_self_contained_with_every_section(report):
    text = report.read_text(encoding="utf-8")
    p = Parsed()
    p.feed(text)
    assert "script" not in p.tags and "link" not in p.tags and "iframe" not in p.tags
    assert not [r for r in p.refs if not r.startswith("#")], p.refs
    assert (
        "url(" not in text
        and "@import" not in text
        and "http" not in text.replace("http://www.w3.org/2000/svg", "")
    )
    assert p.tags.count("svg") == 4  # breakdown, memory, Gantt, scatter
    assert [h.split(" (")[0].split(":")[0] for h in p.h2] == [
        "The plan",
        "Best configurations",
        "Where the step goes",
        "Memory per GPU against capacity",
        "Pipeline schedule",
        "Step time against memory",
        "Design review",
    ]


def test_figures_are_the_searchs(report):
    best = json.loads(
        CliRunner()
        .invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "1", "--json"])
        .output
    )["results"][0]
    text = report.read_text(encoding="utf-8")
    assert f"<td>{fmt_time(best['step_time_s'])}</td>" in text
    assert f"best: {fmt_time(best['step_time_s'])}" in text  # the scatter marks the best
    assert "HBM 85.9 GB" in text
    # the band is in the table, under the breakdown and on the scatter, with what it rests on
    lo, hi = best["expected_error"]["step_time_range_s"]
    assert "expected (typical band)" in text and best["expected_error"]["basis"] in text
    assert f"typical band of the best ({fmt_time(lo)} to {fmt_time(hi)})" in text


def test_bad_input():
    r = CliRunner().invoke(main, ["report", "gpt3-175b.yaml", "--gpus", "8", "-o", "x.html"])
    assert r.exit_code == 1 and "nothing fits" in r.output
    r = CliRunner().invoke(main, ["report", "gpt3-175b.yaml", "-o", "/no/such/dir/r.html"])
    assert r.exit_code == 1 and "cannot write /no/such/dir/r.html" in r.output
    assert CliRunner().invoke(main, ["report", "gpt3-175b.yaml"]).exit_code == 2  # -o is required


@pytest.mark.skipif(
    CHROMIUM is None,
    reason=(
        "headless Chromium is not installed (Debian package chromium; "
        ".ci/run installs it where apt-get can)"
    ),
)
def test_renders_in_headless_chromium(report, tmp_path):
    def shot(url, name):
        png = tmp_path / name
        subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--window-size=1100,2600",
                f"--screenshot={png}",
                url,
            ],
            capture_output=True,
            timeout=120,
        )
        return png.read_bytes() if png.exists() else b""

    page = shot(report.as_uri(), "report.png")
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    empty = shot(blank.as_uri(), "blank.png")
    assert page[:8] == b"\x89PNG\r\n\x1a\n" and empty[:8] == b"\x89PNG\r\n\x1a\n"
    # a page of tables and four charts compresses far worse than a blank one of the same size
    assert len(page) > 20 * len(empty), (len(page), len(empty))

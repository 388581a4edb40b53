"""The HTML report on a laptop screen (issue 33): a viewport, the CP exchange and the schedule in
the configuration, and charts that shrink to an 800-pixel window instead of overflowing it
(checked in headless Chromium where it is installed)."""

import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from perfmodel.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    r = CliRunner().invoke(
        main, ["report", "llama3-8b-h100", "--pp", "2", "--cp", "2", "--tp", "2", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


def test_a_viewport_and_every_chart_scales(report):
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in report
    svgs = re.findall(r"<svg [^>]*>", report)
    assert len(svgs) >= 3
    assert all(tag.count("viewBox") == 1 for tag in svgs), svgs
    assert "svg{max-width:100%;height:auto}" in report


def test_the_configuration_names_the_cp_exchange_and_the_schedule(report):
    rows = re.findall(r"<td class=t>(tp \d+, pp 2, [^<]*)</td>", report)
    assert rows
    assert all(re.search(r"cp 2 \((p2p|a2a)\)", r) for r in rows), rows
    assert all(r.endswith(("1f1b", "interleaved", "gpipe")) for r in rows), rows


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian package chromium; .ci/run installs it)",
)
def test_nothing_overflows_an_800_pixel_window(report, tmp_path):
    probe = (
        "<script>document.body.setAttribute('data-scroll-width',"
        " String(document.documentElement.scrollWidth))</script></body>"
    )
    page = tmp_path / "probe.html"
    page.write_text(report.replace("</body>", probe), encoding="utf-8")
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=800,1000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    found = re.search(r'data-scroll-width="(\d+)"', dom)
    assert found, dom[:300]
    assert int(found[1]) <= 800  # the page is no wider than the window: nothing to scroll

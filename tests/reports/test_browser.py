"""report.html in headless Chromium: the plots draw, nothing errs, nothing is fetched,
the screenshot of the plot area is a picture, not a blank page, and fault labels stay
apart however close their faults start."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest
from PIL import Image

from reports import write_html
from reports.describe import fault_label
from tests.reports.browser import PageVisit, find_chromium, visit
from tests.reports.runs import (
    CLOSE_KILLS,
    busy_history,
    fault_storm,
    read_results,
    storm_history,
    write_run,
)

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (./dev installs Debian's chromium "
    "as root; or apt-get install chromium)")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_html(write_run(tmp_path_factory.mktemp("busy"), busy_history()))


def _open(page: Path, element: str = "over-time", measure: str = "") -> PageVisit:
    assert CHROMIUM is not None
    return visit(page, element=element, binary=CHROMIUM, measure=measure)


def test_the_report_renders_its_plots_without_errors_or_network(page: Path) -> None:
    seen = _open(page)
    assert seen.errors == []
    assert seen.requests == [page.resolve().as_uri()]  # plotly.js is inline
    assert seen.plots >= 2  # over time and timeline (plotly draws 2 SVG layers each)
    image = Image.open(io.BytesIO(seen.screenshot)).convert("RGB")
    assert image.width > 800 and image.height > 500
    colours = image.getcolors(maxcolors=1 << 24)
    assert colours is not None and len(colours) > 100  # lines, shading, text
    white = sum(n for n, rgb in colours if min(rgb) > 245)
    assert white / (image.width * image.height) < 0.5


def test_a_script_error_in_the_page_is_caught(page: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>reportNotDefined.draw();</script>"
        "<script>console.error('plot data missing');</script></body>"), encoding="utf-8")
    errors = _open(broken).errors
    assert any("reportNotDefined is not defined" in e for e in errors), errors
    assert any("console.error: plot data missing" in e for e in errors), errors


def test_no_fault_label_overlaps_another_or_a_plot_title(tmp_path: Path) -> None:
    """Four kills 0.5 s apart among 40 faults in a minute (one browser visit: a visit
    costs seconds of a busy machine)."""
    faults = sorted([*CLOSE_KILLS, *fault_storm()], key=lambda fault: fault[1])
    run = write_run(tmp_path / "run", storm_history(faults))
    seen = _open(write_html(run), measure="#over-time .annotation-text, #over-time .textpoint")
    assert seen.errors == []
    labels = sorted(fault_label(f) for f in read_results(run)["faults"])
    assert sorted(b.text for b in seen.boxes if "→" in b.text) == labels  # all drawn
    for a, b in itertools.combinations(seen.boxes, 2):
        apart = a.right <= b.left or b.right <= a.left or a.bottom <= b.top or b.bottom <= a.top
        assert apart, (a, b)

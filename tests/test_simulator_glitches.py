"""The simulator's glitches found in the trial, each mended and kept mended.

No broken-image icon before the first matrix; the heatmap's "(recorded)" labels clear its legend;
the notes run (``read_file``) shows no outbox; the parallel turn's heatmap keeps the same
promises. tests/test_browser.py checks the first and the last in the served page too.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from resumable_core import lab
from resumable_core.lab.render import heatmap_figure
from resumable_core.lab.widgets import CrashSimulator, MatrixHeatmap


@pytest.mark.slow
def test_recorded_labels_clear_the_legend() -> None:
    """With every strategy "(recorded)", as the student kit draws them, no strategy label touches the legend."""
    recorded = [
        replace(r, strategy=lab.say("{strategy} (recorded)", strategy=r.strategy)) for r in lab.recorded_matrix()
    ]
    naive = [replace(r, strategy=name) for r in lab.recorded_matrix()[:14] for name in ("none", "delete", "rerun")]
    fig = heatmap_figure(naive + recorded)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    page = fig.bbox
    labels = [t for ax in fig.axes for t in ax.get_xticklabels() if t.get_text()]
    assert any("(recorded)" in t.get_text() for t in labels)
    for label in labels:
        box = label.get_window_extent(renderer)
        assert not box.overlaps(legend), f"{label.get_text()!r} overlaps the legend"
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0, f"{label.get_text()!r} is cut off"


@pytest.mark.slow
def test_the_heatmap_image_is_hidden_until_a_matrix_is_drawn() -> None:
    """Before Compute the empty Image is not displayed (it drew a broken-image icon); after, it is."""
    heatmap = MatrixHeatmap(strategies=[], recorded=lab.recorded_matrix())  # nothing to crash: recorded rows only
    assert heatmap.image.layout.display == "none" and heatmap.image.value == b""
    heatmap.compute()
    assert heatmap.image.layout.display != "none" and heatmap.image.value[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_the_notes_run_shows_no_outbox() -> None:
    """The Outbox panel shows for send_email and not for read_file: on the menu, and for the case shown."""
    sim = CrashSimulator()
    assert sim.scenario.value == "send_email" and sim.outbox_panel.layout.display != "none"
    sim.scenario.value = "read_file"
    assert sim.outbox_panel.layout.display == "none"
    sim.crash_point.value = "after_tool"
    assert sim.run().row.tool == "read_file" and sim.outbox_panel.layout.display == "none"
    sim.scenario.value = "send_email"  # a case is shown: the panel stays as that case needs until Run
    assert sim.outbox_panel.layout.display == "none"
    sim.run()
    assert sim.outbox_panel.layout.display != "none"


PARALLEL = "send_email+read_file"
"""The simulator page's third view: the parallel turn's matrix."""


@pytest.mark.slow
def test_the_parallel_heatmap_clears_its_legend_and_titles() -> None:
    """The parallel turn's one panel (8 points, a two-line title, "(recorded)" labels): no label on the legend, nothing cut off."""
    recorded = [
        replace(r, strategy=lab.say("{strategy} (recorded)", strategy=r.strategy))
        for r in lab.recorded_matrix([PARALLEL])
    ]
    naive = [replace(r, strategy=name) for r in lab.recorded_matrix([PARALLEL])[:8] for name in ("none", "delete")]
    fig = heatmap_figure(naive + recorded)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    page = fig.bbox
    texts = [t for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), ax.title) if t.get_text()]
    assert any(t.get_text() == "between_tools" for t in texts)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    for name, box in boxes:
        assert not box.overlaps(legend), f"{name!r} overlaps the legend"
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 <= box.y1 <= page.y1, (
            f"{name!r} is cut off"
        )
    legend_box = fig.legends[0].get_window_extent(renderer)
    assert page.x0 <= legend_box.x0 and legend_box.x1 <= page.x1, "the legend is cut off at the page's sides"
    suptitle = fig._suptitle.get_window_extent(renderer)
    assert page.x0 <= suptitle.x0 and suptitle.x1 <= page.x1, (
        "the figure's title is cut off at the page's sides"
    )  # matplotlib has no public getter for the suptitle's Text
    title = next(box for name, box in boxes if name.startswith("crash in the turn"))
    assert not title.overlaps(suptitle), "the panel's two-line title overlaps the figure's title"


@pytest.mark.slow
def test_the_parallel_heatmap_is_hidden_until_drawn() -> None:
    """The page's parallel heatmap shows no broken image before Compute either, and draws from its recorded rows."""
    heatmap = MatrixHeatmap(strategies=[], scenarios=[PARALLEL], recorded=lab.recorded_matrix([PARALLEL]))
    assert heatmap.image.layout.display == "none" and heatmap.image.value == b""
    assert len(heatmap.compute()) == 16 and heatmap.image.value[:8] == b"\x89PNG\r\n\x1a\n"

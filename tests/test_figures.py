"""lab/figures.py: the turn diagram is drawn from CRASH_POINTS; the lesson charts render as PNG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from resumable_core import crash, lab
from resumable_core.lab import figures
from resumable_core.lab.columns import width
from resumable_core.lab.exercise_checkpoints import load_exercise_checkpoint

SVG = "{http://www.w3.org/2000/svg}"


def crash_labels(svg: str) -> list[str]:
    """The crash point names the diagram labels, top to bottom."""
    root = ET.fromstring(svg)
    texts = [t for t in root.iter(f"{SVG}text") if t.get("class") == "crash-point"]
    texts.sort(key=lambda t: float(t.get("y", 0)))
    return [re.sub(r"^\d+ ", "", t.text or "") for t in texts]


def test_the_turn_diagram_marks_every_crash_point_in_order():
    """The diagram is valid SVG labelling each of the eight crash points, in the library's order."""
    fig = lab.turn_diagram()
    assert fig._repr_svg_() == fig.svg
    assert crash_labels(fig.svg) == list(crash.CRASH_POINTS)
    assert "save A" in fig.svg and "save B" in fig.svg and "8 crash points" in fig.svg


def test_the_turn_diagram_follows_the_list(monkeypatch):
    """Renaming and adding crash points changes the picture: it is drawn from CRASH_POINTS, not copied."""
    points = (*("after_tool_ran" if p == "after_tool" else p for p in crash.CRASH_POINTS), "after_lease")
    monkeypatch.setattr(crash, "CRASH_POINTS", points)
    svg = lab.turn_diagram().svg
    assert crash_labels(svg) == list(points)
    assert "9 crash points" in svg and ">5 after_tool<" not in svg


def test_a_point_sits_at_the_step_its_name_says():
    """before_model_call is above the model call's arrow, during_save_b on save B's arrow, between_tools and
    after_save_b below it."""
    svg = lab.turn_diagram().svg
    root = ET.fromstring(svg)

    def y_of(text: str) -> float:
        return next(float(t.get("y", 0)) for t in root.iter(f"{SVG}text") if (t.text or "").startswith(text))

    assert y_of("1 before_model_call") < y_of("model call:") < y_of("2 after_response")
    assert y_of("save B:") < y_of("6 during_save_b") + 10 < y_of("7 between_tools") < y_of("8 after_save_b")


def test_every_crash_points_help_ends_before_its_circle():
    """Each help line under a crash point fits left of the agent loop's lane; a long one (point 7) takes two lines."""
    root = ET.fromstring(lab.turn_diagram().svg)
    helps = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("x") == "12" and t.get("font-size") == "10.5"]
    assert max(map(width, helps)) <= figures._HELP_COLUMNS
    assert figures._LANES["loop"] - 10 > 12 + figures._HELP_COLUMNS * 5.8  # a column at 10.5 px is ~5.8 px
    assert len(helps) == len(crash.CRASH_POINTS) + 1 and "(the first's result saved," in " ".join(helps)


@pytest.mark.slow
def test_lesson_4s_legends_are_outside_the_data(monkeypatch):
    """The retry chart's legends sit below their axes, never on the spikes of retries without jitter."""
    drawn: list[Any] = []
    monkeypatch.setattr(figures, "_png", drawn.append)
    spikes = [0.5, 1.5, 3.5, 7.5, 15.5] * 200
    figures.retry_arrivals(spikes, [t / 100 for t in range(1000)], [[0.1, 0.2]] * 5, clients=200, attempts=5)
    renderer = drawn[0]._get_renderer()
    for ax in drawn[0].axes:
        assert not ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_a_figures_text_form_is_short_so_a_notebook_stores_the_png_once():
    """IPython stores a PngFigure as image/png and a short text/plain, not the PNG's bytes again as text."""
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(figures.PngFigure(b"\x89PNG" + bytes(100_000)))
    assert set(data) == {"image/png", "text/plain"} and len(data["text/plain"]) < 60
    assert len(repr(figures.SvgFigure("<svg/>" * 10_000))) < 60


@pytest.mark.slow
@pytest.mark.parametrize(
    "draw",
    [
        lambda: lab.resume_vs_restart_chart(
            [{"turn": k, "spent_before_crash": 100 * k, "resume": 500 - 90 * k, "restart": 600} for k in range(1, 6)]
        ),
        lambda: lab.save_timeline(load_exercise_checkpoint("A").messages),
        lambda: lab.crash_loop_chart(
            [{"model_calls": 3 * i, "turns": 3 * i} for i in (1, 2, 3)],
            [{"model_calls": 3 * i, "turns": 3} for i in range(1, 9)],
            8,
        ),
    ],
    ids=["resume_vs_restart", "save_timeline", "crash_loop"],
)
def test_the_lesson_charts_are_png(draw):
    """Each lesson-1 chart renders to PNG bytes Jupyter can show."""
    fig = draw()
    assert fig._repr_png_() == fig.png and fig.png.startswith(b"\x89PNG")


@pytest.mark.slow
def test_the_crash_window_is_png():
    """Lesson 2's pending-vs-sent picture renders to PNG bytes, one column per crash point."""
    points = list(crash.CRASH_POINTS)
    n = len(points)
    fig = lab.figures.crash_window(points, pending=[3 <= i <= 5 for i in range(n)], sent=[i >= 4 for i in range(n)])
    assert fig._repr_png_() == fig.png and fig.png.startswith(b"\x89PNG")


def test_the_crash_window_needs_a_value_per_point():
    """A pending or sent list of another length than the points is refused, naming the counts."""
    with pytest.raises(ValueError, match="one pending and one sent value per point"):
        lab.figures.crash_window(["after_tool"], pending=[True, False], sent=[True])

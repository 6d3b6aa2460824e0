"""The lessons' pictures, one function per picture, so a lesson cell is one call.

Organised by lesson: shared pieces first, then one section per lesson (append a new lesson's
figures in its own section). SVG figures are drawn by hand and need nothing; PNG figures use
matplotlib's object API (no pyplot). Each returns an object Jupyter displays, carrying its
``.svg`` text or ``.png`` bytes for tests.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import crash
from .columns import wrap
from .core_words import core
from .i18n import N_, _
from .render import _quiet_pyplot_free_matplotlib, esc

__all__ = [
    "PngFigure",
    "SvgFigure",
    "crash_loop_chart",
    "crash_window",
    "resume_vs_restart_chart",
    "retry_arrivals",
    "save_timeline",
    "turn_diagram",
]


# -- shared ------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class SvgFigure:
    """An SVG picture: Jupyter shows it; ``.svg`` is its text (its repr, the notebook's text/plain, is short)."""

    svg: str

    def __repr__(self) -> str:
        return f"SvgFigure(svg=<{len(self.svg)} characters>)"

    def _repr_svg_(self) -> str:
        return self.svg


@dataclass(frozen=True, repr=False)
class PngFigure:
    """A PNG picture: Jupyter shows it; ``.png`` is its bytes, stored once in a notebook (as image/png: its repr,
    the notebook's text/plain, is short)."""

    png: bytes

    def __repr__(self) -> str:
        return f"PngFigure(png=<{len(self.png)} bytes>)"

    def _repr_png_(self) -> bytes:
        return self.png


def _png(fig: Any) -> PngFigure:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return PngFigure(buf.getvalue())


def _new_figure(width: float, height: float) -> Any:
    Figure = _quiet_pyplot_free_matplotlib()[0]
    return Figure(figsize=(width, height), dpi=100)


# -- lesson 1: the turn diagram ----------------------------------------------------------------

_LANES = {"loop": 330, "claude": 500, "tool": 660, "disk": 820}
_LANE_TITLES = {
    "loop": N_("agent loop"),
    "claude": N_("Claude (Messages API)"),
    "tool": N_("tool (world)"),
    "disk": "checkpoint.json",
}


@dataclass(frozen=True)
class _Step:
    key: str
    source: str
    target: str
    label: str
    reply: bool = False


_STEPS = (
    _Step("model_call", "loop", "claude", N_("model call: messages.create(messages)")),
    _Step("response", "claude", "loop", N_("response: text + tool_use"), reply=True),
    _Step("save_a", "loop", "disk", N_("save A: + assistant message, pending_tool_uses = its calls")),
    _Step("tool", "loop", "tool", N_("the tool runs (read_file, send_email …)")),
    _Step("save_b", "loop", "disk", N_("save B: + the call's tool_result (the turn's last: all in one message)")),
)
_STEP_INDEX = {s.key: i for i, s in enumerate(_STEPS)}
_ROW, _TOP = 46, 70


def _anchor(point: str) -> tuple[str | None, int | None]:
    """``before_model_call`` -> ("before", index of model_call); a name that fits no step -> (None, None)."""
    m = re.fullmatch(r"(before|after|during)_(\w+)", point)
    if m is None or m.group(2) not in _STEP_INDEX:
        return None, None
    return m.group(1), _STEP_INDEX[m.group(2)]


def _layout(points: Sequence[str]) -> list[tuple[str, Any, list[str]]]:
    """Rows top to bottom: ("step", step, [crash points during it]) and ("point", name, []), in the list's order."""
    rows: list[tuple[str, Any, list[str]]] = []
    step_row: dict[int, list[str]] = {}
    shown = 0

    def show_steps(upto: int) -> None:
        nonlocal shown
        while shown < upto:
            step_row[shown] = []
            rows.append(("step", _STEPS[shown], step_row[shown]))
            shown += 1

    for point in points:
        rel, index = _anchor(point)
        if index is None:
            rows.append(("point", point, []))
        elif rel == "before":
            show_steps(index)
            rows.append(("point", point, []))
        else:
            show_steps(index + 1)
            if rel == "during":
                step_row[index].append(point)
            else:
                rows.append(("point", point, []))
    show_steps(len(_STEPS))
    return rows


def _marker(x: float, y: float, number: int) -> str:
    return (
        f'<circle cx="{x}" cy="{y}" r="10" fill="#c62828"/>'
        f'<text x="{x}" y="{y + 4}" text-anchor="middle" font-size="11" font-weight="700" fill="#fff">{number}</text>'
    )


_HELP_COLUMNS = 50
"""Terminal columns of a crash point's help line: at 10.5 px one column is ~5.8 px, so a line ends before
the agent loop's lane, where the point's circle sits; a longer help text goes on a second line."""


def _point_label(y: float, number: int, point: str) -> str:
    lines = wrap(core(crash.CRASH_POINT_HELP.get(point, "")), _HELP_COLUMNS)
    return (
        f'<text x="12" y="{y - 2}" font-size="12" font-weight="700" fill="#8e0000" class="crash-point">'
        f"{number} {esc(point)}</text>"
    ) + "".join(
        f'<text x="12" y="{y + 12 + 11 * i}" font-size="10.5" fill="#555">{esc(line)}</text>'
        for i, line in enumerate(lines)
    )


def _arrow(step: _Step, y: float) -> str:
    x1, x2 = _LANES[step.source], _LANES[step.target]
    dash = ' stroke-dasharray="5,4"' if step.reply else ""
    return (
        f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#333" stroke-width="1.5"{dash} marker-end="url(#head)"/>'
        f'<text x="{min(x1, x2) + 6}" y="{y - 6}" font-size="11" fill="#222">{esc(_(step.label))}</text>'
    )


def turn_diagram() -> SvgFigure:
    """One tool-use turn as a sequence diagram, with every crash point of ``CRASH_POINTS`` marked in order.

    Drawn from :data:`resumable_core.crash.CRASH_POINTS` each time: a point named
    ``before_X``/``after_X``/``during_X`` sits at step X (model_call, response, save_a, tool,
    save_b); another name sits where the list puts it.
    """
    points = tuple(crash.CRASH_POINTS)
    number = {p: i + 1 for i, p in enumerate(points)}
    rows = _layout(points)
    height = _TOP + _ROW * len(rows) + 30
    parts = []
    y_of: dict[str, float] = {}
    for i, (kind, item, during) in enumerate(rows):
        y = _TOP + _ROW * i + _ROW / 2
        if kind == "step":
            y_of[item.key] = y
            parts.append(_arrow(item, y))
            for p in during:  # the save is cut halfway: the marker sits on its arrow
                at = _LANES[item.source] + 0.8 * (_LANES[item.target] - _LANES[item.source])
                parts += [_marker(at, y, number[p]), _point_label(y, number[p], p)]
        else:
            parts += [
                f'<line x1="250" y1="{y}" x2="{_LANES["loop"] - 12}" y2="{y}" stroke="#c62828" stroke-dasharray="2,3"/>',
                _marker(_LANES["loop"], y, number[item]),
                _point_label(y, number[item], item),
            ]
    if "save_a" in y_of and "save_b" in y_of:  # between A and B the file on disk says "a call is pending"
        top, bottom = y_of["save_a"], y_of["save_b"]
        parts.insert(
            0,
            f'<rect x="{_LANES["disk"] - 9}" y="{top}" width="18" height="{bottom - top}" fill="#ffb300" opacity="0.45"/>'
            f'<text x="{_LANES["disk"] + 14}" y="{(top + bottom) / 2}" font-size="10.5" fill="#8a5a00">'
            + esc(_("pending"))
            + "</text>",
        )
    lanes = "".join(
        f'<line x1="{x}" y1="{_TOP - 10}" x2="{x}" y2="{height - 20}" stroke="#bbb"/>'
        f'<text x="{x}" y="{_TOP - 20}" text-anchor="middle" font-size="12" font-weight="700">{esc(_(_LANE_TITLES[k]))}</text>'
        for k, x in _LANES.items()
    )
    title = _("One tool-use turn and its {count} crash points").format(count=len(points))
    return SvgFigure(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" viewBox="0 0 900 {height}" '
        'font-family="Helvetica, Arial, sans-serif">'
        '<defs><marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>'
        f'<text x="12" y="22" font-size="14" font-weight="700">{esc(title)}</text>' + lanes + "".join(parts) + "</svg>"
    )


# -- lesson 1: resume vs restart, the save points of a run, a crash loop -----------------------


def resume_vs_restart_chart(rows: Sequence[dict[str, int]]) -> PngFigure:
    """Bars per crash turn: tokens a resume spends after the crash vs a restart (and what a restart throws away).

    ``rows``: one dict per crash, with ``turn``, ``spent_before_crash``, ``resume`` and ``restart``.
    """
    fig = _new_figure(8, 3.2)
    ax = fig.subplots()
    turns = [r["turn"] for r in rows]
    ax.bar([k - 0.2 for k in turns], [r["resume"] for r in rows], width=0.4, label=_("resume: tokens after the crash"))
    ax.bar(
        [k + 0.2 for k in turns], [r["restart"] for r in rows], width=0.4, label=_("restart: tokens after the crash")
    )
    ax.bar(
        [k + 0.2 for k in turns],
        [r["spent_before_crash"] for r in rows],
        width=0.4,
        bottom=[r["restart"] for r in rows],
        color="lightgray",
        hatch="//",
        label=_("restart also throws these away"),
    )
    ax.set_xlabel(_("crash just before model call number …"))
    ax.set_ylabel(_("tokens"))
    ax.set_title(_("The notes run, crashed at each turn: resume vs restart"))
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _png(fig)


def _timeline_turn(ax: Any, x: float, turn: int, message: dict[str, Any]) -> float:
    """Draw one model call and its save A (and its tool, if any); return where the next item starts."""
    from matplotlib.patches import Rectangle

    use = next((b for b in message["content"] if b["type"] == "tool_use"), None)
    ax.add_patch(Rectangle((x, 0.35), 1, 0.3, color="#4c72b0"))
    ax.text(
        x + 0.5,
        0.5,
        _("model\n#{turn}").format(turn=turn),
        ha="center",
        va="center",
        color="white",
        fontsize=7,
    )
    x += 1.15
    ax.plot(x, 0.5, "D", color="#1f77b4", ms=9)
    ax.text(x, 0.8, "A", ha="center", fontsize=9, weight="bold")
    if use is None:
        ax.text(x + 0.2, 0.5, _("final answer:\nfinished"), va="center", fontsize=8)
        return x
    ax.axvspan(x, x + 1.6, ymin=0.15, ymax=0.85, color="orange", alpha=0.25)
    ax.add_patch(Rectangle((x + 0.2, 0.35), 1, 0.3, color="#55a868"))
    ax.text(x + 0.7, 0.5, use["name"], ha="center", va="center", color="white", fontsize=6)
    return x + 0.2


def save_timeline(messages: Sequence[dict[str, Any]]) -> PngFigure:
    """One run drawn from its messages: each model call, the save A after it, each tool, the save B after it.

    Orange stretches are where ``pending_tool_uses`` is not empty on disk (between a tool turn's A and B).
    """
    fig = _new_figure(12, 1.8)
    ax = fig.subplots()
    x, turn = 0.0, 0
    for m in messages[1:]:
        if m["role"] == "assistant":
            turn += 1
            x = _timeline_turn(ax, x, turn, m)
        else:
            x += 1.4
            ax.plot(x, 0.5, "D", color="#2ca02c", ms=9)
            ax.text(x, 0.8, "B", ha="center", fontsize=9, weight="bold")
            x += 0.25
    ax.set_xlim(-0.2, x + 1.6)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(_("Save A after every model response, save B after every tool result (orange: a call is pending)"))
    fig.tight_layout()
    return _png(fig)


def crash_loop_chart(carried: Sequence[dict[str, Any]], reset: Sequence[dict[str, Any]], max_turns: int) -> PngFigure:
    """Model calls per process of a stuck task in a crash loop, with ``turns`` carried over vs reset.

    Each history entry has ``model_calls`` (in the record) and ``turns`` (what the counter says).
    """
    fig = _new_figure(7, 3.2)
    ax = fig.subplots()
    ax.plot(
        range(1, len(carried) + 1),
        [h["model_calls"] for h in carried],
        "o-",
        label=_("turns carried over (task-wide)"),
    )
    ax.plot(
        range(1, len(reset) + 1),
        [h["model_calls"] for h in reset],
        "s--",
        color="crimson",
        label=_("turns reset on resume (per process)"),
    )
    ax.plot(
        range(1, len(reset) + 1),
        [h["turns"] for h in reset],
        ":",
        color="crimson",
        label=_("what the reset counter believes"),
    )
    ax.axhline(max_turns, color="gray", lw=1)
    ax.text(1, max_turns + 0.5, _("max_turns = {max_turns}").format(max_turns=max_turns), color="gray", fontsize=8)
    ax.set_xlabel(_("process number (each one killed, then resumed)"))
    ax.set_ylabel(_("model calls made for the task"))
    ax.set_title(_("A stuck task in a crash loop"))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


# -- lesson 2: what the checkpoint says vs what happened ---------------------------------------


def crash_window(points: Sequence[str], *, pending: Sequence[bool], sent: Sequence[bool]) -> PngFigure:
    """Two rows of yes/no squares, one column per crash point: a call pending on disk, the email sent.

    ``pending[i]`` and ``sent[i]`` describe the crash at ``points[i]`` (lesson 2 crashes the email run at each).
    """
    if not len(points) == len(pending) == len(sent):
        raise ValueError(f"crash_window needs one pending and one sent value per point, got {len(points)} points")
    fig = _new_figure(9, 1.9)
    ax = fig.subplots()
    rows = [[bool(v) for v in pending], [bool(v) for v in sent]]
    ax.imshow(rows, cmap="Oranges", vmin=0, vmax=1.6, aspect="auto")
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            ax.text(j, i, _("yes") if value else _("no"), ha="center", va="center", fontsize=9)
    ax.set_xticks(range(len(points)), list(points), rotation=20, fontsize=8)
    ax.set_yticks([0, 1], [_("checkpoint: call pending?"), _("world: email sent?")], fontsize=9)
    ax.set_title(_("Crash on the send_email turn: what the checkpoint says vs what happened"), fontsize=10)
    fig.tight_layout()
    return _png(fig)


# -- lesson 4: retries with and without jitter -------------------------------------------------


def retry_arrivals(
    plain: Sequence[float],
    jittered: Sequence[float],
    samples: Sequence[Sequence[float]],
    *,
    clients: int,
    attempts: int,
    base: float = 0.5,
    cap: float = 30.0,
) -> PngFigure:
    """Left: when the retries of ``clients`` clients land, without jitter and with full jitter.

    Right: ``samples[n - 1]`` are delays drawn for attempt ``n``, under the ceiling
    ``min(cap, base * 2 ** (n - 1))``. Times and delays are in seconds.
    """
    fig = _new_figure(11, 3.2)
    left, right = fig.subplots(1, 2)
    bins = [i * 0.1 for i in range(161)]
    left.hist(plain, bins=bins, color="crimson", alpha=0.7, label=_("no jitter"))
    left.hist(jittered, bins=bins, color="#4c72b0", alpha=0.7, label=_("full jitter"))
    left.set_xlabel(_("seconds after the outage began"))
    left.set_ylabel(_("retries per 0.1 s"))
    left.set_title(_("{clients} clients, {attempts} retries each").format(clients=clients, attempts=attempts))
    # Below the axes, never on the spikes of the retries without jitter.
    below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.22), "ncol": 2, "fontsize": 8, "frameon": False}
    left.legend(**below)
    for n, delays in enumerate(samples, start=1):
        right.scatter([n] * len(delays), delays, s=4, alpha=0.3, color="#4c72b0")
    ns = range(1, len(samples) + 1)
    right.plot(ns, [min(cap, base * 2 ** (n - 1)) for n in ns], "k--", label="min(cap, base·2^(n-1))")
    right.set_xlabel(_("attempt n"))
    right.set_ylabel(_("delay (s)"))
    right.set_title(_("full jitter: uniform under the exponential ceiling"))
    right.legend(**below)
    fig.tight_layout()
    return _png(fig)

"""The interactive crash simulator: crash an agent on purpose and watch each reconcile strategy.

Two ipywidgets views for the lessons and the standalone Voila page (``simulator/simulator.ipynb``)::

    from resumable_core.lab.widgets import CrashSimulator, MatrixHeatmap
    CrashSimulator().view                    # one crash, shown in full
    CrashSimulator(reconcile=my_fn).view     # adds "my reconcile" to the strategies
    MatrixHeatmap().view                     # the whole crash matrix as a heatmap

The widgets stay thin: every run is ``resumable_core.run_cell`` (a real fork, SIGKILL and
resume) or ``resumable_core.run_matrix``; this module only renders what they return. The
rendering helpers (``checkpoint_html``, ``outbox_html``, ``conversation_html``,
``heatmap_png``) are plain functions of the library's data, so tests can check them directly.

This module is imported only explicitly (it imports ipywidgets); ``import resumable_core``
stays fast. Nothing here writes to stderr: errors are shown inside the widget.
"""

from __future__ import annotations

import html
import io
import json
import logging
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as widgets

from ..crash import CRASH_POINT_HELP, CRASH_POINTS
from ..scenarios import SCENARIOS
from ..strategies import STRATEGIES
from .matrix import MATRIX_STRATEGIES, Cell, MatrixRow, run_cell, run_matrix

Reconcile = Callable[..., Any]
"""A reconcile strategy: ``reconcile(cp, tools) -> Checkpoint``."""

__all__ = [
    "MY_RECONCILE",
    "CrashSimulator",
    "MatrixHeatmap",
    "cell_category",
    "checkpoint_html",
    "conversation_html",
    "email_count_html",
    "error_html",
    "heatmap_png",
    "outbox_html",
]

MY_RECONCILE = "my reconcile"
"""The strategy dropdown's label for the learner's own function."""


STRATEGY_HELP = {
    "none": "naive resume: leave the dangling tool_use as it is (the API refuses it)",
    "delete": "drop the assistant message that asked for the call (hides the fact, not the risk)",
    "rerun": "run the call again whatever it does (the postmortem's production code)",
    "by_effect": "the lesson's rule: re-run read-only tools; otherwise answer “status unknown”",
    "by_effect_ledger": "by effect, plus receipts and an idempotency key the outbox dedupes on",
    MY_RECONCILE: "your reconcile(cp, tools) function",
}

CSS = """
<style>
.rs-sim { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
.rs-help { color: #444; font-size: 13px; line-height: 1.45; }
.rs-help code { background: #f2f2f2; padding: 0 3px; border-radius: 3px; }
.rs-box { border: 1px solid #ddd; border-radius: 6px; padding: 8px 10px; background: #fff; }
.rs-h { font-weight: 600; font-size: 14px; margin: 0 0 6px 0; color: #222; }
/* !important: JupyterLab's and the widgets' own rules for <pre> win otherwise */
.rs-sim pre.rs-json { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace !important;
           font-size: 12px !important; line-height: 1.35 !important; white-space: pre-wrap;
           word-break: break-word; max-height: 760px; overflow: auto; margin: 0; padding: 6px;
           color: #222; background: #fafafa; border: 1px solid #e5e5e5; border-radius: 4px; }
.rs-json .rs-key { color: #7a3e9d; }
.rs-json .rs-str { color: #1a6b2f; }
.rs-json .rs-num { color: #1750a3; }
.rs-sim details.rs-fold { display: inline-block; vertical-align: top; margin: 0; }
.rs-sim details.rs-fold > summary { display: inline; cursor: pointer; color: #666; list-style: none; }
.rs-sim details.rs-fold > summary::-webkit-details-marker { display: none; }
.rs-fold-hint { color: #999; font-size: 11px; }
.rs-pending-mark { background: #ffe680; border-radius: 2px; display: inline;
                   -webkit-box-decoration-break: clone; box-decoration-break: clone; }
.rs-pending-tag { background: #e0a800; color: #fff; font-weight: 700; font-size: 11px;
                  padding: 1px 5px; border-radius: 3px; margin-left: 6px;
                  font-family: -apple-system, "Segoe UI", Roboto, sans-serif; }
.rs-count { font-size: 30px; font-weight: 800; padding: 8px 14px; border-radius: 8px;
            display: inline-block; border: 2px solid #999; background: #f6f6f6; color: #222; }
.rs-count.rs-dup { background: #fde2e1; border-color: #c62828; color: #8e0000; }
.rs-count.rs-one { background: #e3f5e5; border-color: #2e7d32; color: #1b5e20; }
.rs-sub { font-size: 12px; color: #555; margin-top: 4px; }
.rs-error { border: 2px solid #c62828; background: #fdecea; color: #7f0000; border-radius: 6px;
            padding: 8px 10px; font-family: "DejaVu Sans Mono", Menlo, monospace; font-size: 12px;
            white-space: pre-wrap; word-break: break-word; }
.rs-ok { border: 1px solid #2e7d32; background: #edf7ee; color: #1b5e20; border-radius: 6px;
         padding: 6px 10px; font-size: 13px; }
.rs-mail { border-left: 4px solid #1565c0; background: #f3f7fd; padding: 4px 8px; margin: 4px 0;
           font-size: 12px; }
.rs-mail.rs-mail-dup { border-left-color: #c62828; background: #fdf1f0; }
.rs-msg { border-radius: 6px; padding: 5px 8px; margin: 4px 0; font-size: 12px; line-height: 1.4; }
.rs-msg.rs-user { background: #f1f3f5; }
.rs-msg.rs-assistant { background: #eef4ff; }
.rs-role { font-weight: 700; font-size: 11px; text-transform: uppercase; color: #555; }
.rs-block { font-family: "DejaVu Sans Mono", Menlo, monospace; font-size: 11.5px;
            white-space: pre-wrap; word-break: break-word; }
.rs-block.rs-iserr { color: #8e0000; }
.rs-sim pre.rs-story { font-family: inherit !important; font-size: 13px !important;
           line-height: 1.5 !important; white-space: pre-wrap; margin: 0; }
</style>
"""


# --------------------------------------------------------------------------------------
# Rendering: plain functions of the library's data
# --------------------------------------------------------------------------------------


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=False)


FOLD_KEEP = 2
"""The checkpoint view shows the last FOLD_KEEP messages in full; earlier ones fold to one line."""


def _folded(message: Any, index: int, is_pending: Callable[[Any], bool]) -> str:
    role = message.get("role", "?") if isinstance(message, dict) else "?"
    summary = f'{{"role": "{_esc(role)}", …}}  <span class="rs-fold-hint">messages[{index}] ▸ click to show</span>'
    return f'<details class="rs-fold"><summary>{summary}</summary>{_json_html(message, 0, is_pending)}</details>'


def _json_html(value: Any, indent: int, is_pending: Callable[[Any], bool]) -> str:
    """Pretty JSON (as ``json.dumps(indent=2)``) as HTML, pending blocks wrapped in a mark.

    At the top level, all but the last ``FOLD_KEEP`` messages fold into a one-line ``<details>``.
    """
    pad = "  " * indent
    inner = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            out = "{}"
        else:
            items = []
            for k, v in value.items():
                if indent == 0 and k == "messages" and isinstance(v, list) and len(v) > FOLD_KEEP:
                    keep = len(v) - FOLD_KEEP
                    rows = [inner + "  " + _folded(m, i, is_pending) for i, m in enumerate(v[:keep])]
                    rows += [inner + "  " + _json_html(m, indent + 2, is_pending) for m in v[keep:]]
                    rendered = "[\n" + ",\n".join(rows) + "\n" + inner + "]"
                else:
                    rendered = _json_html(v, indent + 1, is_pending)
                items.append(f'{inner}<span class="rs-key">{_esc(json.dumps(k))}</span>: {rendered}')
            out = "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if is_pending(value):
            out = f'<span class="rs-pending-mark">{out}</span><span class="rs-pending-tag">PENDING</span>'
        return out
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [inner + _json_html(v, indent + 1, is_pending) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    if isinstance(value, str):
        return f'<span class="rs-str">{_esc(json.dumps(value, ensure_ascii=False))}</span>'
    return f'<span class="rs-num">{_esc(json.dumps(value))}</span>'


def checkpoint_html(checkpoint: dict[str, Any] | None) -> str:
    """The checkpoint JSON on disk as HTML, with the pending tool_use (and its record) highlighted."""
    if checkpoint is None:
        return (
            '<div class="rs-help">No checkpoint file was on disk at the crash: the run died before its '
            "first save, so the resume starts the task afresh.</div>"
        )
    pending = checkpoint.get("pending_tool_use")
    pending_id = pending.get("id") if isinstance(pending, dict) else None

    def is_pending(d: Any) -> bool:
        if pending_id is None or not isinstance(d, dict):
            return False
        return (d.get("type") == "tool_use" and d.get("id") == pending_id) or d is pending

    if pending_id:
        note = (
            f'<div class="rs-help">Pending call: <code>{_esc(pending.get("name"))}</code> '
            f"(<code>{_esc(pending_id)}</code>), asked for by the last assistant message and never "
            "answered with a tool_result. This is the dangling call reconcile must settle.</div>"
        )
    else:
        note = '<div class="rs-help">Nothing pending: every tool_use in this checkpoint has its tool_result.</div>'
    body = _json_html(checkpoint, 0, is_pending)
    return f'{note}<pre class="rs-json rs-checkpoint">{body}</pre>'


def email_count_html(outbox: list[dict[str, Any]] | None, outbox_at_crash: list[dict[str, Any]] | None = None) -> str:
    """The big "Emails sent: N" badge (N = emails in the outbox after the resume)."""
    if outbox is None:
        return '<div class="rs-count">Emails sent: –</div><div class="rs-sub">Press Run.</div>'
    n = len(outbox)
    subjects = [e.get("subject") for e in outbox]
    dup = len(subjects) != len(set(subjects))
    cls = "rs-count rs-dup" if dup else ("rs-count rs-one" if n else "rs-count")
    sub = ""
    if outbox_at_crash is not None:
        sub = f"{len(outbox_at_crash)} in the outbox at the crash, {n} after the resume"
        if dup:
            sub += " — the team got the same email twice"
    return f'<div class="{cls}">Emails sent: {n}</div><div class="rs-sub">{_esc(sub)}</div>'


def outbox_html(outbox: list[dict[str, Any]]) -> str:
    """The outbox table: one entry per email actually sent, duplicates marked."""
    if not outbox:
        return '<div class="rs-help">The outbox is empty.</div>'
    seen: set[str] = set()
    parts = []
    for e in outbox:
        dup = e.get("subject") in seen
        seen.add(e.get("subject"))
        key = e.get("idempotency_key")
        parts.append(
            f'<div class="rs-mail{" rs-mail-dup" if dup else ""}">'
            f"<b>#{_esc(e.get('id'))}</b> to {_esc(e.get('to'))} — “{_esc(e.get('subject'))}”"
            + (" <b>(duplicate)</b>" if dup else "")
            + (f'<br><span class="rs-sub">idempotency key: <code>{_esc(key)}</code></span>' if key else "")
            + "</div>"
        )
    return "".join(parts)


def error_html(error: str | None) -> str:
    """The API's 400 text in a red box, or a green note that the API accepted the resume."""
    if error is None:
        return '<div class="rs-ok">No API error: the Messages API accepted the resumed conversation.</div>'
    return (
        '<div class="rs-error"><b>400 invalid_request_error</b> — the Messages API refused the resume:\n'
        f"{_esc(error)}</div>"
    )


def _short(value: Any, limit: int = 220) -> str:
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def conversation_html(messages: list[dict[str, Any]], last: int = 4) -> str:
    """The last ``last`` messages of the conversation, block by block."""
    if not messages:
        return '<div class="rs-help">No conversation.</div>'
    skipped = max(0, len(messages) - last)
    parts = [f'<div class="rs-sub">… {skipped} earlier message(s) not shown</div>'] if skipped else []
    for i, m in enumerate(messages[-last:], start=skipped):
        role = m.get("role", "?")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        rendered = []
        for b in blocks:
            t = b.get("type")
            if t == "text":
                rendered.append(f'<div class="rs-block">{_esc(_short(b.get("text", "")))}</div>')
            elif t == "tool_use":
                rendered.append(
                    f'<div class="rs-block">→ tool_use <b>{_esc(b.get("name"))}</b>'
                    f'({_esc(_short(b.get("input", {}), 160))}) <span class="rs-sub">{_esc(b.get("id"))}</span></div>'
                )
            elif t == "tool_result":
                err = bool(b.get("is_error"))
                rendered.append(
                    f'<div class="rs-block{" rs-iserr" if err else ""}">← tool_result'
                    f'{" (is_error)" if err else ""} for <span class="rs-sub">{_esc(b.get("tool_use_id"))}</span>: '
                    f"{_esc(_short(b.get('content', '')))}</div>"
                )
            else:
                rendered.append(f'<div class="rs-block">{_esc(_short(b))}</div>')
        parts.append(
            f'<div class="rs-msg rs-{_esc(role)}"><span class="rs-role">messages[{i}] · {_esc(role)}</span>'
            + "".join(rendered)
            + "</div>"
        )
    return "".join(parts)


# --------------------------------------------------------------------------------------
# The one-crash simulator
# --------------------------------------------------------------------------------------


def _panel(title: str, child: widgets.Widget, **layout: Any) -> widgets.VBox:
    head = widgets.HTML(f'<div class="rs-h">{_esc(title)}</div>')
    return widgets.VBox([head, child], layout=widgets.Layout(**{"padding": "4px 6px", **layout}))


class CrashSimulator:
    """Pick a scenario, a crash point and a strategy; Run crashes a real run and resumes it.

    ``reconcile``: a learner's ``reconcile(cp, tools) -> Checkpoint``; it appears in the strategy
    dropdown as "my reconcile" (and is selected).
    """

    def __init__(self, reconcile: Reconcile | None = None) -> None:
        self.reconcile = reconcile
        self.cell: Cell | None = None
        """The last run's :class:`~resumable_core.lab.matrix.Cell` (None before the first run)."""
        style = {"description_width": "initial"}
        self.scenario = widgets.Dropdown(
            options=list(SCENARIOS),
            value="send_email",
            description="Scenario",
            style=style,
            layout=widgets.Layout(width="210px"),
        )
        self.crash_point = widgets.Dropdown(
            options=list(CRASH_POINTS),
            value="after_tool",
            description="Crash point",
            style=style,
            layout=widgets.Layout(width="260px"),
        )
        strategies = list(STRATEGIES) + ([MY_RECONCILE] if reconcile is not None else [])
        self.strategy = widgets.Dropdown(
            options=strategies,
            value=MY_RECONCILE if reconcile is not None else "rerun",
            description="Strategy",
            style=style,
            layout=widgets.Layout(width="250px"),
        )
        self.run_button = widgets.Button(
            description="Run",
            button_style="danger",
            icon="bolt",
            tooltip="Crash the run for real (fork + SIGKILL) and resume it",
            layout=widgets.Layout(width="100px"),
        )
        for w, cls in (
            (self.scenario, "rs-scenario"),
            (self.crash_point, "rs-crash-point"),
            (self.strategy, "rs-strategy"),
            (self.run_button, "rs-run"),
        ):
            w.add_class(cls)
        self.help = widgets.HTML(layout=widgets.Layout(margin="2px 0 6px 8px"))
        self.status = widgets.HTML()
        self.status.add_class("rs-status")
        self.email_count = widgets.HTML(email_count_html(None))
        self.email_count.add_class("rs-email-count")
        self.summary = widgets.HTML()
        self.summary.add_class("rs-summary")
        self.error = widgets.HTML()
        self.error.add_class("rs-api-error")
        self.checkpoint = widgets.HTML('<div class="rs-help">The checkpoint on disk at the crash appears here.</div>')
        self.checkpoint.add_class("rs-checkpoint-view")
        self.outbox = widgets.HTML()
        self.outbox.add_class("rs-outbox")
        self.conversation = widgets.HTML()
        self.conversation.add_class("rs-conversation")
        self.story = widgets.HTML()
        self.story.add_class("rs-story-view")

        controls = widgets.HBox(
            [self.scenario, self.crash_point, self.strategy, self.run_button],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        left = widgets.VBox(
            [_panel("Checkpoint on disk at the crash", self.checkpoint)],
            layout=widgets.Layout(width="52%", min_width="320px"),
        )
        right = widgets.VBox(
            [
                _panel("Outbox", widgets.VBox([self.email_count, self.outbox])),
                _panel("API", self.error),
                _panel("After the resume", self.summary),
                _panel("Conversation tail", self.conversation),
            ],
            layout=widgets.Layout(width="46%", min_width="300px"),
        )
        results = widgets.HBox([left, right], layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start"))
        self.view = widgets.VBox(
            [widgets.HTML(CSS), controls, self.help, self.status, results, _panel("What happened", self.story)],
            layout=widgets.Layout(border="1px solid #ddd", padding="8px", width="100%"),
        )
        self.view.add_class("rs-sim")
        self.view.add_class("rs-simulator")

        for w in (self.scenario, self.crash_point, self.strategy):
            w.observe(self._on_change, names="value")
        self.run_button.on_click(self._on_click)
        self._show_help()

    # -- callbacks --------------------------------------------------------------------

    def _strategy_fn(self) -> str | Reconcile:
        if self.strategy.value == MY_RECONCILE:
            assert self.reconcile is not None
            return self.reconcile
        return self.strategy.value

    def _show_help(self) -> None:
        self.help.value = (
            '<div class="rs-help">'
            f"<b>{_esc(self.scenario.value)}</b>: {_esc(SCENARIOS[self.scenario.value].help)}<br>"
            f"<b>{_esc(self.crash_point.value)}</b>: crash {_esc(CRASH_POINT_HELP[self.crash_point.value])}, "
            f"on the turn that calls {_esc(self.scenario.value)}<br>"
            f"<b>{_esc(self.strategy.value)}</b>: {_esc(STRATEGY_HELP[self.strategy.value])}</div>"
        )

    def _on_change(self, change: dict[str, Any]) -> None:
        self._show_help()
        if self.cell is not None:
            self.status.value = '<div class="rs-help"><i>Settings changed: press Run to see this case.</i></div>'

    def _on_click(self, _button: widgets.Button) -> None:
        try:
            self.run()
        except Exception:  # noqa: BLE001 - shown in the widget by run(); never to stderr
            pass

    # -- the run ------------------------------------------------------------------------

    def run(self) -> Cell:
        """Crash and resume with the current settings (``run_cell``), show it, return the Cell."""
        scenario, point, label = self.scenario.value, self.crash_point.value, self.strategy.value
        self.run_button.disabled = True
        self.status.value = '<div class="rs-help"><i>Running: fork, SIGKILL, resume…</i></div>'
        try:
            cell = run_cell(point, scenario, self._strategy_fn())
        except Exception as e:
            self.cell = None
            self.email_count.value = email_count_html(None)
            where = "your reconcile" if label == MY_RECONCILE else f"the run ({label})"
            self.status.value = (
                f'<div class="rs-error"><b>{_esc(type(e).__name__)} raised in {_esc(where)}:</b>\n'
                f"{_esc(traceback.format_exc(limit=-3))}</div>"
            )
            for w in (self.summary, self.error, self.checkpoint, self.outbox, self.conversation, self.story):
                w.value = ""
            raise
        finally:
            self.run_button.disabled = False
        self.cell = cell
        self.show(cell, label=label)
        return cell

    def show(self, cell: Cell, label: str | None = None) -> None:
        """Render a Cell into the views."""
        r = cell.row
        self.status.value = (
            f'<div class="rs-help">Showing <b>{_esc(r.tool)}</b> · crash <b>{_esc(r.crash_point)}</b> · '
            f"strategy <b>{_esc(label or r.strategy)}</b> — the child was "
            f"{'killed with SIGKILL' if cell.killed else 'not killed (it finished first)'}.</div>"
        )
        self.email_count.value = email_count_html(cell.outbox, cell.outbox_at_crash)
        self.outbox.value = outbox_html(cell.outbox)
        self.error.value = error_html(cell.error)
        what = "emails sent with this subject" if r.tool == "send_email" else "times the crashed read_file ran"
        self.summary.value = (
            '<div class="rs-help">'
            f'Effects of the crashed call ({what}): <b class="rs-effects">{r.effects}</b><br>'
            f"Run completed: <b>{'yes' if r.completed else 'no'}</b> · turns {r.turns} · tokens {r.tokens}"
            + (f"<br>Final answer: “{_esc(cell.final_text)}”" if cell.final_text else "")
            + "</div>"
        )
        self.checkpoint.value = checkpoint_html(cell.checkpoint_at_crash)
        self.conversation.value = conversation_html(cell.messages)
        self.story.value = f'<pre class="rs-story">{_esc(cell.story())}</pre>'


# --------------------------------------------------------------------------------------
# The crash matrix as a heatmap
# --------------------------------------------------------------------------------------

CATEGORIES: tuple[tuple[str, str], ...] = (
    ("exactly once", "#4caf50"),
    ("harmless re-read", "#fff59d"),
    ("duplicate side effect", "#ef6c00"),
    ("API 400 (run stuck)", "#c62828"),
    ("never happened", "#9e9e9e"),
)
"""The heatmap's colour for each kind of outcome, in legend order."""


def cell_category(row: MatrixRow) -> int:
    """Index into ``CATEGORIES`` for one matrix row."""
    if row.api_error:
        return 3
    if row.effects > 1:
        return 2 if row.tool == "send_email" else 1
    if row.effects == 1 and row.completed:
        return 0
    return 4


def _quiet_pyplot_free_matplotlib() -> Any:
    """Import matplotlib's object API without pyplot; keep its one-off font-cache notice off stderr."""
    log = logging.getLogger("matplotlib.font_manager")
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        import matplotlib.font_manager
        from matplotlib.colors import ListedColormap
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch

        matplotlib.font_manager.fontManager  # noqa: B018 - builds the font cache here, quietly
    finally:
        log.setLevel(old)
    return Figure, ListedColormap, Patch


def heatmap_png(rows: list[MatrixRow], *, dpi: int = 100) -> bytes:
    """Draw crash point x strategy, one panel per tool, as PNG bytes (no pyplot, no display)."""
    Figure, ListedColormap, Patch = _quiet_pyplot_free_matplotlib()
    tools = list(dict.fromkeys(r.tool for r in rows))
    strategies = list(dict.fromkeys(r.strategy for r in rows))
    points = [p for p in CRASH_POINTS if any(r.crash_point == p for r in rows)]
    by_key = {(r.tool, r.crash_point, r.strategy): r for r in rows}
    cmap = ListedColormap([c for _, c in CATEGORIES])
    fig = Figure(figsize=(4.6 * len(tools) + 1.6, 0.45 * len(points) + 2.2), dpi=dpi)
    axes = fig.subplots(1, len(tools), sharey=True, squeeze=False)[0]
    for ax, tool in zip(axes, tools):
        grid = [
            [cell_category(by_key[(tool, p, s)]) if (tool, p, s) in by_key else 4 for s in strategies] for p in points
        ]
        ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(CATEGORIES) - 0.5, aspect="auto")
        for i, p in enumerate(points):
            for j, s in enumerate(strategies):
                r = by_key.get((tool, p, s))
                if r is None:
                    continue
                text = "400" if r.api_error else f"{r.effects}×"
                dark = cell_category(r) in (2, 3)
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=10,
                    fontweight="bold",
                    color="white" if dark else "#222",
                )
        ax.set_xticks(range(len(strategies)), strategies, rotation=30, ha="right", fontsize=9)
        ax.set_yticks(range(len(points)), points, fontsize=9)
        ax.set_xticks([x - 0.5 for x in range(1, len(strategies))], minor=True)
        ax.set_yticks([y - 0.5 for y in range(1, len(points))], minor=True)
        ax.grid(which="minor", color="white", linewidth=2)
        ax.tick_params(which="minor", length=0)
        ax.set_title(f"crash on the turn that calls {tool}", fontsize=11)
    axes[0].set_ylabel("crash point")
    labels = axes[0].get_yticklabels()
    if "after_tool" in points and len(labels) == len(points):
        labels[points.index("after_tool")].set_fontweight("bold")
    fig.legend(
        handles=[Patch(facecolor=c, edgecolor="#888", label=n) for n, c in CATEGORIES],
        loc="lower center",
        ncol=len(CATEGORIES),
        fontsize=9,
        frameon=False,
    )
    fig.suptitle(
        "Crash matrix: how often the crashed call's effect happened (400 = API refused the resume)", fontsize=11
    )
    fig.subplots_adjust(left=0.15, right=0.985, top=0.87, bottom=0.22, wspace=0.06)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


class MatrixHeatmap:
    """The whole crash matrix (crash point x strategy, one panel per tool) as a heatmap.

    A button runs ``run_matrix`` (70 real crash-and-resume cells, a few seconds). ``reconcile``
    adds a learner's function as one more column, "my reconcile".
    """

    def __init__(
        self,
        strategies: Iterable[str] = ("none", *MATRIX_STRATEGIES),
        tools: Iterable[str] = tuple(SCENARIOS),
        crash_points: Iterable[str] = CRASH_POINTS,
        reconcile: Reconcile | None = None,
    ) -> None:
        self.strategies = list(strategies)
        self.tools = list(tools)
        self.crash_points = list(crash_points)
        self.reconcile = reconcile
        self.rows: list[MatrixRow] = []
        total = len(self.tools) * len(self.crash_points) * (len(self.strategies) + (reconcile is not None))
        self.run_button = widgets.Button(
            description=f"Compute the matrix ({total} crashes)",
            button_style="primary",
            icon="th",
            layout=widgets.Layout(width="260px"),
        )
        self.run_button.add_class("rs-matrix-run")
        self.progress = widgets.IntProgress(value=0, min=0, max=total, layout=widgets.Layout(width="260px"))
        self.progress.add_class("rs-matrix-progress")
        self.status = widgets.HTML(
            '<div class="rs-help">Every crash point × strategy, crashed for real and resumed. '
            "Colour = what happened to the crashed call; the number = how many times its effect happened.</div>"
        )
        self.status.add_class("rs-matrix-status")
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", width="auto"))
        self.image.add_class("rs-heatmap")
        self.view = widgets.VBox(
            [widgets.HTML(CSS), widgets.HBox([self.run_button, self.progress]), self.status, self.image],
            layout=widgets.Layout(border="1px solid #ddd", padding="8px", width="100%"),
        )
        self.view.add_class("rs-sim")
        self.view.add_class("rs-matrix")
        self.run_button.on_click(self._on_click)

    def _on_click(self, _button: widgets.Button) -> None:
        try:
            self.compute()
        except Exception:  # noqa: BLE001 - shown in the widget by compute(); never to stderr
            pass

    def compute(self) -> list[MatrixRow]:
        """Run the matrix, draw the heatmap, return the rows."""
        self.run_button.disabled = True
        self.progress.value = 0
        self.status.value = '<div class="rs-help"><i>Crashing and resuming…</i></div>'

        def tick(_row: MatrixRow) -> None:
            self.progress.value += 1

        try:
            strategies: list[Any] = list(self.strategies)
            if self.reconcile is not None:
                strategies.append(self.reconcile)
            rows = run_matrix(strategies=strategies, tools=self.tools, crash_points=self.crash_points, progress=tick)
            if self.reconcile is not None:
                mine = getattr(self.reconcile, "__name__", MY_RECONCILE)
                for r in rows:
                    if r.strategy == mine and mine not in self.strategies:
                        r.strategy = MY_RECONCILE
            self.image.value = heatmap_png(rows)
        except Exception as e:
            self.status.value = (
                f'<div class="rs-error"><b>{_esc(type(e).__name__)}:</b>\n{_esc(traceback.format_exc(limit=-3))}</div>'
            )
            raise
        finally:
            self.run_button.disabled = False
        self.rows = rows
        dup = sum(1 for r in rows if r.tool == "send_email" and r.effects > 1)
        err = sum(1 for r in rows if r.api_error)
        self.status.value = (
            f'<div class="rs-help">{len(rows)} cells: <b>{dup}</b> sent a duplicate email, '
            f"<b>{err}</b> were refused by the API (400). Bold row: <code>after_tool</code>, the postmortem's crash.</div>"
        )
        return rows

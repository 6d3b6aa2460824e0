"""HTML and PNG views of the lab's data: checkpoints, outboxes, conversations, the crash matrix.

Plain functions of the library's data (a checkpoint's JSON, a :class:`~resumable_core.lab.matrix.Cell`,
matrix rows), so tests check them directly and the widgets only place them on screen. Nothing
here imports ipywidgets; matplotlib is imported only when a heatmap is drawn.
"""

from __future__ import annotations

import html
import io
import json
import logging
from collections.abc import Callable
from typing import Any

from ..checkpoint import Checkpoint, pending_calls, text_of
from ..crash import CRASH_POINT_HELP, CRASH_POINTS, points_passed
from ..scenarios import SCENARIOS
from ..tools import DEFAULT_TOOLS, Effect
from .core_words import core
from .fonts import use_hangul_fallback
from .i18n import N_, _
from .matrix import Cell, MatrixRow, where_in_turn

__all__ = [
    "CATEGORIES",
    "CSS",
    "cell_category",
    "cell_summary_html",
    "checkpoint_html",
    "conversation_html",
    "counted_tool",
    "describe_checkpoint",
    "email_count_html",
    "error_html",
    "esc",
    "has_side_effect",
    "heatmap_figure",
    "heatmap_png",
    "outbox_html",
    "settings_help_html",
]

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
"""The stylesheet the ``rs-*`` classes of every view here assume (shown once per widget)."""


def esc(value: Any) -> str:
    """``value`` as text safe inside HTML."""
    return html.escape(str(value), quote=False)


def has_side_effect(tool_name: str) -> bool:
    """The kit's tool ``tool_name`` changes the world (so a second run is a duplicate, not a re-read)."""
    return any(t.name == tool_name and t.effect is Effect.SIDE_EFFECT for t in DEFAULT_TOOLS)


def describe_checkpoint(cp: Checkpoint) -> str:
    """A checkpoint's state in a few lines: counters, the last message, every recorded result and pending call.

    A turn that asked for several tools and crashed between them has results already recorded
    (``recorded_results``, in block order) and calls still pending (``pending_tool_uses``): both
    are listed, one line each, in that order."""
    last = cp.messages[-1]
    content = last["content"]
    if isinstance(content, str):
        kinds = "text"
    else:
        kinds = ", ".join(
            b.get("type", "?") + (f" {b['name']}" if b.get("type") == "tool_use" else "") for b in content
        )
    names = {b["id"]: b["name"] for b in content if b.get("type") == "tool_use"} if isinstance(content, list) else {}
    lines = [
        _("task: {task}").format(task=repr(cp.task)),  # the user's words to the model: data, quoted
        _("turns: {turns}, tokens_used: {tokens}, messages: {messages}").format(
            turns=cp.turns, tokens=cp.tokens_used, messages=len(cp.messages)
        ),
        _("last message: role={role}, blocks: {blocks}").format(role=last["role"], blocks=kinds),
    ]
    if cp.recorded_results:
        lines.append(_("recorded_results: {count}").format(count=len(cp.recorded_results)))
        for r in cp.recorded_results:
            error = " is_error" if r.get("is_error") else ""
            text = _short(text_of(r.get("content", "")), 100)
            lines.append(f"  {names.get(r.get('tool_use_id'), '?')} id={r.get('tool_use_id')}{error}: {text}")
    if len(cp.pending_tool_uses) > 1 or cp.recorded_results:
        lines.append(_("pending_tool_uses: {count}").format(count=len(cp.pending_tool_uses)))
        lines += [f"  {p.name}({json.dumps(p.input)}) id={p.id}" for p in cp.pending_tool_uses]
    else:  # one call or none: the one line a one-call turn needs
        p = cp.pending_tool_use
        call = f"{p.name}({json.dumps(p.input)}) id={p.id}" if p else "None"
        lines.append(_("pending_tool_use: {call}").format(call=call))
    return "\n".join(lines)


# -- the checkpoint file as highlighted JSON ---------------------------------------------------

FOLD_KEEP = 2
"""The checkpoint view shows the last FOLD_KEEP messages in full; earlier ones fold to one line."""

IsPending = Callable[[Any], bool]


def _folded(message: Any, index: int, is_pending: IsPending) -> str:
    role = message.get("role", "?") if isinstance(message, dict) else "?"
    summary = f'{{"role": "{esc(role)}", …}}  <span class="rs-fold-hint">messages[{index}] ▸ click to show</span>'
    return f'<details class="rs-fold"><summary>{summary}</summary>{_json_html(message, 0, is_pending)}</details>'


def _messages_html(messages: list[Any], indent: int, is_pending: IsPending) -> str:
    """The top-level ``messages`` list: all but the last ``FOLD_KEEP`` fold into one line each."""
    inner = "  " * (indent + 1)
    keep = len(messages) - FOLD_KEEP
    rows = [inner + "  " + _folded(m, i, is_pending) for i, m in enumerate(messages[:keep])]
    rows += [inner + "  " + _json_html(m, indent + 2, is_pending) for m in messages[keep:]]
    return "[\n" + ",\n".join(rows) + "\n" + inner + "]"


def _dict_html(value: dict[str, Any], indent: int, is_pending: IsPending) -> str:
    if not value:
        return "{}"
    inner = "  " * (indent + 1)
    items = []
    for k, v in value.items():
        if indent == 0 and k == "messages" and isinstance(v, list) and len(v) > FOLD_KEEP:
            rendered = _messages_html(v, indent, is_pending)
        else:
            rendered = _json_html(v, indent + 1, is_pending)
        items.append(f'{inner}<span class="rs-key">{esc(json.dumps(k))}</span>: {rendered}')
    return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"


def _json_html(value: Any, indent: int, is_pending: IsPending) -> str:
    """Pretty JSON (as ``json.dumps(indent=2)``) as HTML, pending blocks wrapped in a mark."""
    if isinstance(value, dict):
        out = _dict_html(value, indent, is_pending)
        if is_pending(value):
            out = f'<span class="rs-pending-mark">{out}</span><span class="rs-pending-tag">PENDING</span>'
        return out
    if isinstance(value, list):
        if not value:
            return "[]"
        items = ["  " * (indent + 1) + _json_html(v, indent + 1, is_pending) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    if isinstance(value, str):
        return f'<span class="rs-str">{esc(json.dumps(value, ensure_ascii=False))}</span>'
    return f'<span class="rs-num">{esc(json.dumps(value))}</span>'


def checkpoint_html(checkpoint: dict[str, Any] | None) -> str:
    """The checkpoint JSON on disk as HTML, with the pending tool_use (and its record) highlighted."""
    if checkpoint is None:
        return (
            '<div class="rs-help">'
            + _(
                "No checkpoint file was on disk at the crash: the run died before its "
                "first save, so the resume starts the task afresh."
            )
            + "</div>"
        )
    pending = [p for p in pending_calls(checkpoint) if isinstance(p, dict) and p.get("id")]
    pending_ids = {p.get("id") for p in pending}

    def is_pending(d: Any) -> bool:
        if not pending_ids or not isinstance(d, dict):
            return False
        return (d.get("type") == "tool_use" and d.get("id") in pending_ids) or any(d is p for p in pending)

    recorded = checkpoint.get("recorded_results")
    recorded = [b for b in recorded if isinstance(b, dict)] if isinstance(recorded, list) else []
    kept = ""
    if recorded:
        ids = ", ".join(f"<code>{esc(b.get('tool_use_id'))}</code>" for b in recorded)
        kept = _(
            " The turn asked for {count} tools at once and the crash fell between them: "
            "the result of {ids} is already recorded (<code>recorded_results</code>) and must be kept."
        ).format(count=len(recorded) + len(pending), ids=ids)
    if len(pending) == 1:
        only = pending[0]
        note = (
            '<div class="rs-help">'
            + _(
                "Pending call: <code>{name}</code> (<code>{id}</code>), asked for by the last assistant message "
                "and never answered with a tool_result. This is the dangling call reconcile must settle."
            ).format(name=esc(only.get("name")), id=esc(only.get("id")))
            + f"{kept}</div>"
        )
    elif pending:
        calls = ", ".join(f"<code>{esc(p.get('name'))}</code> (<code>{esc(p.get('id'))}</code>)" for p in pending)
        note = (
            '<div class="rs-help">'
            + _(
                "Pending calls: {calls}, asked for at once by the last assistant message and "
                "never answered with a tool_result. These are the dangling calls reconcile must settle."
            ).format(calls=calls)
            + f"{kept}</div>"
        )
    else:
        note = (
            '<div class="rs-help">'
            + _("Nothing pending: every tool_use in this checkpoint has its tool_result.")
            + "</div>"
        )
    body = _json_html(checkpoint, 0, is_pending)
    return f'{note}<pre class="rs-json rs-checkpoint">{body}</pre>'


# -- the outbox, the API's answer, the conversation --------------------------------------------


def email_count_html(outbox: list[dict[str, Any]] | None, outbox_at_crash: list[dict[str, Any]] | None = None) -> str:
    """The big "Emails sent: N" badge (N = emails in the outbox after the resume)."""
    if outbox is None:
        return (
            '<div class="rs-count">' + _("Emails sent: –") + '</div><div class="rs-sub">' + _("Press Run.") + "</div>"
        )
    n = len(outbox)
    subjects = [e.get("subject") for e in outbox]
    dup = len(subjects) != len(set(subjects))
    cls = "rs-count rs-dup" if dup else ("rs-count rs-one" if n else "rs-count")
    sub = ""
    if outbox_at_crash is not None:
        sub = _("{at_crash} in the outbox at the crash, {n} after the resume").format(
            at_crash=len(outbox_at_crash), n=n
        )
        if dup:
            sub += _(" — the team got the same email twice")
    sent = _("Emails sent: {n}").format(n=n)
    return f'<div class="{cls}">{sent}</div><div class="rs-sub">{esc(sub)}</div>'


def outbox_html(outbox: list[dict[str, Any]]) -> str:
    """The outbox table: one entry per email actually sent, duplicates marked."""
    if not outbox:
        return '<div class="rs-help">' + _("The outbox is empty.") + "</div>"
    seen: set[str] = set()
    parts = []
    for e in outbox:
        dup = e.get("subject") in seen
        seen.add(e.get("subject", ""))
        key = e.get("idempotency_key")
        parts.append(
            f'<div class="rs-mail{" rs-mail-dup" if dup else ""}">'
            f"<b>#{esc(e.get('id'))}</b> to {esc(e.get('to'))} — “{esc(e.get('subject'))}”"
            + (" <b>" + _("(duplicate)") + "</b>" if dup else "")
            + ('<br><span class="rs-sub">' + _("idempotency key:") + f" <code>{esc(key)}</code></span>" if key else "")
            + "</div>"
        )
    return "".join(parts)


def error_html(error: str | None) -> str:
    """The API's 400 text in a red box, or a green note that the API accepted the resume."""
    if error is None:
        return '<div class="rs-ok">' + _("No API error: the Messages API accepted the resumed conversation.") + "</div>"
    refused = _("the Messages API refused the resume:")
    return f'<div class="rs-error"><b>400 invalid_request_error</b> — {refused}\n{esc(error)}</div>'


def _short(value: Any, limit: int = 220) -> str:
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _block_html(block: dict[str, Any]) -> str:
    """One content block of a message, on one line."""
    kind = block.get("type")
    if kind == "text":
        return f'<div class="rs-block">{esc(_short(block.get("text", "")))}</div>'
    if kind == "tool_use":
        return (
            f'<div class="rs-block">→ tool_use <b>{esc(block.get("name"))}</b>'
            f'({esc(_short(block.get("input", {}), 160))}) <span class="rs-sub">{esc(block.get("id"))}</span></div>'
        )
    if kind == "tool_result":
        err = bool(block.get("is_error"))
        return (
            f'<div class="rs-block{" rs-iserr" if err else ""}">← tool_result'
            f'{" (is_error)" if err else ""} for <span class="rs-sub">{esc(block.get("tool_use_id"))}</span>: '
            f"{esc(_short(block.get('content', '')))}</div>"
        )
    return f'<div class="rs-block">{esc(_short(block))}</div>'


def conversation_html(messages: list[dict[str, Any]], last: int = 4) -> str:
    """The last ``last`` messages of the conversation, block by block."""
    if not messages:
        return '<div class="rs-help">' + _("No conversation.") + "</div>"
    skipped = max(0, len(messages) - last)
    hidden = _("… {count} earlier message(s) not shown").format(count=skipped)
    parts = [f'<div class="rs-sub">{hidden}</div>'] if skipped else []
    for i, m in enumerate(messages[-last:], start=skipped):
        role = m.get("role", "?")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        parts.append(
            f'<div class="rs-msg rs-{esc(role)}"><span class="rs-role">messages[{i}] · {esc(role)}</span>'
            + "".join(_block_html(b) for b in blocks)
            + "</div>"
        )
    return "".join(parts)


def counted_tool(scenario: str) -> str:
    """The tool whose effect a scenario's matrix row counts (a one-call scenario's key is its tool)."""
    return SCENARIOS[scenario].tool if scenario in SCENARIOS else scenario


def _effect_words(tool: str) -> str:
    words = _("times the crashed {tool} took effect") if has_side_effect(tool) else _("times the crashed {tool} ran")
    return words.format(tool=tool)


def cell_summary_html(cell: Cell) -> str:
    """What the resume did: the crashed call's effects (each call's, for a parallel turn), whether the run completed."""
    r = cell.row
    tool = counted_tool(r.tool)
    each = ""
    if len(cell.turn_effects) > 1:
        each = (
            _("Each call of the crashed turn: ")
            + ", ".join(f"{esc(_effect_words(t))}: <b>{n}</b>" for t, n in cell.turn_effects.items())
            + "<br>"
        )
    return (
        '<div class="rs-help">'
        + _("Effects of the crashed call ({words}): ").format(words=esc(_effect_words(tool)))
        + f'<b class="rs-effects">{r.effects}</b><br>'
        + each
        + _("Run completed: <b>{completed}</b> · turns {turns} · tokens {tokens}").format(
            completed=_("yes") if r.completed else _("no"), turns=r.turns, tokens=r.tokens
        )
        + (_("<br>Final answer: “{text}”").format(text=esc(cell.final_text)) if cell.final_text else "")
        + "</div>"
    )


def settings_help_html(scenario: str, crash_point: str, strategy: str, strategy_help: str) -> str:
    """One line each on the chosen scenario, crash point and strategy."""
    crash_where = _("crash {where}").format(where=_where(crash_point, scenario))
    return (
        '<div class="rs-help">'
        f"<b>{esc(scenario)}</b>: {esc(core(SCENARIOS[scenario].help))}<br>"
        f"<b>{esc(crash_point)}</b>: {esc(crash_where)}<br>"
        f"<b>{esc(strategy)}</b>: {esc(strategy_help)}</div>"
    )


def _where(crash_point: str, scenario: str) -> str:
    """Where the crash falls in the scenario's crashed turn; a point that turn never passes says so."""
    chosen = SCENARIOS[scenario]
    if crash_point not in points_passed(chosen.calls):
        return _(
            "{help}: a turn that calls only {tool} never passes it, so the run "
            "is not killed (pick the send_email+read_file scenario)"
        ).format(help=core(CRASH_POINT_HELP[crash_point]), tool=chosen.tool)
    return where_in_turn(crash_point, chosen)


# -- the crash matrix as a heatmap -------------------------------------------------------------

CATEGORIES: tuple[tuple[str, str], ...] = (
    (N_("exactly once"), "#4caf50"),
    (N_("harmless re-read"), "#fff59d"),
    (N_("duplicate side effect"), "#ef6c00"),
    (N_("API 400 (run stuck)"), "#c62828"),
    (N_("never happened"), "#9e9e9e"),
)
"""The heatmap's colour for each kind of outcome, in legend order."""


def cell_category(row: MatrixRow) -> int:
    """Index into ``CATEGORIES`` for one matrix row."""
    if row.api_error:
        return 3
    if row.effects > 1:
        return 2 if has_side_effect(counted_tool(row.tool)) else 1
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
        use_hangul_fallback()  # every figure the kit draws comes through here: Korean labels have a font
    finally:
        log.setLevel(old)
    return Figure, ListedColormap, Patch


def _draw_panel(ax: Any, cmap: Any, tool: str, rows: list[MatrixRow], points: list[str], strategies: list[str]) -> None:
    """One tool's crash point x strategy grid, each square labelled with its effect count (or 400)."""
    by_key = {(r.crash_point, r.strategy): r for r in rows if r.tool == tool}
    grid = [[cell_category(by_key[(p, s)]) if (p, s) in by_key else 4 for s in strategies] for p in points]
    ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(CATEGORIES) - 0.5, aspect="auto")
    for i, p in enumerate(points):
        for j, s in enumerate(strategies):
            r = by_key.get((p, s))
            if r is None:
                continue
            dark = cell_category(r) in (2, 3)
            text = "400" if r.api_error else f"{r.effects}×"
            ax.text(
                j, i, text, ha="center", va="center", fontsize=10, fontweight="bold", color="white" if dark else "#222"
            )
    # "by_effect_ledger (recorded)" on two lines: rotated on one, it reached down into the legend
    labels = [s.replace(" (", "\n(") for s in strategies]
    ax.set_xticks(range(len(strategies)), labels, rotation=30, ha="right", rotation_mode="anchor", fontsize=9)
    ax.set_yticks(range(len(points)), points, fontsize=9)
    ax.set_xticks([x - 0.5 for x in range(1, len(strategies))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(points))], minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    chosen = SCENARIOS.get(tool)
    if chosen is not None and chosen.calls > 1:  # the parallel turn: its counted tool is named in the title
        title = _("crash in the turn calling {tools}\n(counted: {tool})").format(
            tools=" + ".join(chosen.tools), tool=chosen.tool
        )
        ax.set_title(title, fontsize=11)
    else:
        ax.set_title(_("crash on the turn that calls {tool}").format(tool=tool), fontsize=11)


def heatmap_figure(rows: list[MatrixRow], *, dpi: int = 100) -> Any:
    """Crash point x strategy, one panel per tool, as a matplotlib Figure (no pyplot).

    Laid out by matplotlib's constrained layout, with the legend outside the panels: the space
    under them grows to fit the rotated strategy labels, so no label reaches the legend.
    """
    Figure, ListedColormap, Patch = _quiet_pyplot_free_matplotlib()
    tools = list(dict.fromkeys(r.tool for r in rows))
    strategies = list(dict.fromkeys(r.strategy for r in rows))
    points = [p for p in CRASH_POINTS if any(r.crash_point == p for r in rows)]
    cmap = ListedColormap([c for _, c in CATEGORIES])
    # as wide as two panels at least: one panel alone (the parallel turn's) cut off the title and the legend
    width = 4.6 * max(len(tools), 2) + 1.6
    fig = Figure(figsize=(width, 0.45 * len(points) + 2.6), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(tools), sharey=True, squeeze=False)[0]
    for ax, tool in zip(axes, tools):
        _draw_panel(ax, cmap, tool, rows, points, strategies)
    axes[0].set_ylabel(_("crash point"))
    labels = axes[0].get_yticklabels()
    if "after_tool" in points and len(labels) == len(points):  # the postmortem's crash, in bold
        labels[points.index("after_tool")].set_fontweight("bold")
    fig.legend(
        handles=[Patch(facecolor=c, edgecolor="#888", label=_(n)) for n, c in CATEGORIES],
        loc="outside lower center",
        ncol=len(CATEGORIES),
        fontsize=9,
        frameon=False,
    )
    fig.suptitle(
        _("Crash matrix: how often the crashed call's effect happened (400 = API refused the resume)"), fontsize=11
    )
    return fig


def heatmap_png(rows: list[MatrixRow], *, dpi: int = 100) -> bytes:
    """Draw crash point x strategy, one panel per tool, as PNG bytes (no pyplot, no display)."""
    buf = io.BytesIO()
    heatmap_figure(rows, dpi=dpi).savefig(buf, format="png")
    return buf.getvalue()

"""The interactive crash simulator: crash an agent on purpose and watch each reconcile strategy.

Two ipywidgets views for the lessons and the standalone Voila page (``simulator/simulator.ipynb``)::

    from resumable_core.lab.widgets import CrashSimulator, MatrixHeatmap
    CrashSimulator().view                    # one crash, shown in full
    CrashSimulator(reconcile=my_fn).view     # adds "my reconcile" to the strategies
    MatrixHeatmap().view                     # the whole crash matrix as a heatmap
    MatrixHeatmap(recorded=lab.recorded_matrix()).view  # plus the answer strategies' recorded rows
    MatrixHeatmap(scenarios=["send_email+read_file"]).view  # the parallel turn's matrix, between_tools too

The widgets stay thin: every run is :func:`~resumable_core.lab.run_cell` (a real fork, SIGKILL
and resume) or :func:`~resumable_core.lab.run_matrix`, and what they return is drawn by
:mod:`resumable_core.lab.render`. The menus read the scenario, crash point and strategy
registries when a widget is made.

This is the only module of the kit that imports ipywidgets, and it is imported only explicitly.
Nothing here writes to stderr: errors are shown inside the widget.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import ipywidgets as widgets

from ..crash import CRASH_POINTS, points_passed
from ..scenarios import SCENARIOS, one_call_scenarios
from ..strategies import STRATEGIES, Reconcile
from .core_words import core
from .i18n import N_, _
from .matrix import Cell, MatrixRow, run_cell, run_matrix
from .render import (
    CSS,
    cell_category,
    cell_summary_html,
    checkpoint_html,
    conversation_html,
    counted_tool,
    email_count_html,
    error_html,
    esc,
    has_side_effect,
    heatmap_png,
    outbox_html,
    settings_help_html,
)

__all__ = ["MY_RECONCILE", "CrashSimulator", "MatrixHeatmap"]

MY_RECONCILE = N_("my reconcile")
"""The strategy menu's label for the learner's own function, as ``_(MY_RECONCILE)`` says it in the learner's language."""
MY_RECONCILE_HELP = N_("your reconcile(cp, tools) function")

DUPLICATE = 2
"""The index of "duplicate side effect" in :data:`~resumable_core.lab.render.CATEGORIES`."""


def _help(text: str, *, italic: bool = False) -> str:
    """A line of help or status as the widgets show it (``text`` is HTML)."""
    return f'<div class="rs-help"><i>{text}</i></div>' if italic else f'<div class="rs-help">{text}</div>'


def _panel(title: str, child: widgets.Widget, **layout: Any) -> widgets.VBox:
    head = widgets.HTML(f'<div class="rs-h">{esc(title)}</div>')
    return widgets.VBox([head, child], layout=widgets.Layout(**{"padding": "4px 6px", **layout}))


def _html(css_class: str, value: str = "") -> widgets.HTML:
    view = widgets.HTML(value)
    view.add_class(css_class)
    return view


def _error_box(exc: BaseException, where: str) -> str:
    return (
        f'<div class="rs-error"><b>{esc(type(exc).__name__)}{where}:</b>\n{esc(traceback.format_exc(limit=-3))}</div>'
    )


def _postmortem_scenario() -> str:
    """The simulator opens on the first scenario whose tool has a side effect (the postmortem's)."""
    return next((s for s in SCENARIOS if has_side_effect(s)), next(iter(SCENARIOS)))


class CrashSimulator:
    """Pick a scenario, a crash point and a strategy; Run crashes a real run and resumes it.

    ``reconcile``: a learner's ``reconcile(cp, tools) -> Checkpoint``; it appears in the strategy
    menu as "my reconcile" (and is selected).
    """

    def __init__(self, reconcile: Reconcile | None = None) -> None:
        self.reconcile = reconcile
        self.mine = _(MY_RECONCILE)
        """The menu's entry for ``reconcile``."""
        self.cell: Cell | None = None
        """The last run's :class:`~resumable_core.lab.matrix.Cell` (None before the first run)."""
        self._make_controls()
        self._make_outputs()
        self.view = self._layout()
        for w in (self.scenario, self.crash_point, self.strategy):
            w.observe(self._on_change, names="value")
        self.run_button.on_click(self._on_click)
        self._show_help()
        self._show_outbox_for(self.scenario.value)

    def _make_controls(self) -> None:
        style = {"description_width": "initial"}

        def menu(options: list[str], value: str, description: str, width: str, css_class: str) -> widgets.Dropdown:
            dropdown = widgets.Dropdown(
                options=options, value=value, description=description, style=style, layout=widgets.Layout(width=width)
            )
            dropdown.add_class(css_class)
            return dropdown

        self.scenario = menu(list(SCENARIOS), _postmortem_scenario(), _("Scenario"), "210px", "rs-scenario")
        self.crash_point = menu(list(CRASH_POINTS), "after_tool", _("Crash point"), "260px", "rs-crash-point")
        mine = [self.mine] if self.reconcile is not None else []
        first = self.mine if mine else "rerun"
        self.strategy = menu([*STRATEGIES, *mine], first, _("Strategy"), "250px", "rs-strategy")
        self.run_button = widgets.Button(
            description=_("Run"),
            button_style="danger",
            icon="bolt",
            tooltip=_("Crash the run for real (fork + SIGKILL) and resume it"),
            layout=widgets.Layout(width="100px"),
        )
        self.run_button.add_class("rs-run")

    def _make_outputs(self) -> None:
        self.help = widgets.HTML(layout=widgets.Layout(margin="2px 0 6px 8px"))
        self.status = _html("rs-status")
        self.email_count = _html("rs-email-count", email_count_html(None))
        self.summary = _html("rs-summary")
        self.error = _html("rs-api-error")
        self.checkpoint = _html("rs-checkpoint-view", _help(_("The checkpoint on disk at the crash appears here.")))
        self.outbox = _html("rs-outbox")
        self.conversation = _html("rs-conversation")
        self.story = _html("rs-story-view")

    def _layout(self) -> widgets.VBox:
        controls = widgets.HBox(
            [self.scenario, self.crash_point, self.strategy, self.run_button],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        left = widgets.VBox(
            [_panel(_("Checkpoint on disk at the crash"), self.checkpoint)],
            layout=widgets.Layout(width="52%", min_width="320px"),
        )
        # Only a scenario whose tool has a side effect (send_email) has an outbox worth showing.
        self.outbox_panel = _panel(_("Outbox"), widgets.VBox([self.email_count, self.outbox]))
        self.outbox_panel.add_class("rs-outbox-panel")
        right = widgets.VBox(
            [
                self.outbox_panel,
                _panel("API", self.error),
                _panel(_("After the resume"), self.summary),
                _panel(_("Conversation tail"), self.conversation),
            ],
            layout=widgets.Layout(width="46%", min_width="300px"),
        )
        results = widgets.HBox([left, right], layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start"))
        view = widgets.VBox(
            [widgets.HTML(CSS), controls, self.help, self.status, results, _panel(_("What happened"), self.story)],
            layout=widgets.Layout(border="1px solid #ddd", padding="8px", width="100%"),
        )
        view.add_class("rs-sim")
        view.add_class("rs-simulator")
        return view

    # -- callbacks --------------------------------------------------------------------

    def _strategy_fn(self) -> str | Reconcile:
        if self.strategy.value == self.mine and self.reconcile is not None:
            return self.reconcile
        return str(self.strategy.value)

    def _show_help(self) -> None:
        label = self.strategy.value
        strategy_help = _(MY_RECONCILE_HELP) if label == self.mine else core(STRATEGIES[label].help)
        self.help.value = settings_help_html(self.scenario.value, self.crash_point.value, label, strategy_help)

    def _show_outbox_for(self, scenario: str) -> None:
        """Show the Outbox panel only for a scenario whose tool has a side effect: the notes run sends no email."""
        self.outbox_panel.layout.display = "" if has_side_effect(counted_tool(scenario)) else "none"

    def _on_change(self, change: dict[str, Any]) -> None:
        self._show_help()
        if self.cell is None:  # nothing shown yet: the panels follow the menu
            self._show_outbox_for(self.scenario.value)
        else:
            self.status.value = _help(_("Settings changed: press Run to see this case."), italic=True)

    def _on_click(self, _button: widgets.Button) -> None:
        with contextlib.suppress(Exception):  # run() shows it in the widget; never to stderr
            self.run()

    # -- the run ------------------------------------------------------------------------

    def run(self) -> Cell:
        """Crash and resume with the current settings (``run_cell``), show it, return the Cell."""
        scenario, point, label = self.scenario.value, self.crash_point.value, self.strategy.value
        self.run_button.disabled = True
        self.status.value = _help(_("Running: fork, SIGKILL, resume…"), italic=True)
        try:
            cell = run_cell(point, scenario, self._strategy_fn())
        except Exception as e:
            self.cell = None
            self.email_count.value = email_count_html(None)
            where = _("your reconcile") if label == self.mine else _("the run ({label})").format(label=label)
            self.status.value = _error_box(e, _(" raised in {where}").format(where=esc(where)))
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
        showing = (
            _(
                "Showing <b>{tool}</b> · crash <b>{crash_point}</b> · strategy <b>{strategy}</b> — the child was killed with SIGKILL."
            )
            if cell.killed
            else _(
                "Showing <b>{tool}</b> · crash <b>{crash_point}</b> · strategy <b>{strategy}</b> — the child was not killed (it finished first)."
            )
        )
        self.status.value = _help(
            showing.format(tool=esc(r.tool), crash_point=esc(r.crash_point), strategy=esc(label or r.strategy))
        )
        self._show_outbox_for(r.tool)
        self.email_count.value = email_count_html(cell.outbox, cell.outbox_at_crash)
        self.outbox.value = outbox_html(cell.outbox)
        self.error.value = error_html(cell.error)
        self.summary.value = cell_summary_html(cell)
        self.checkpoint.value = checkpoint_html(cell.checkpoint_at_crash)
        self.conversation.value = conversation_html(cell.messages)
        self.story.value = f'<pre class="rs-story">{esc(cell.story())}</pre>'


class MatrixHeatmap:
    """The whole crash matrix (crash point x strategy, one panel per scenario) as a heatmap.

    A button runs ``run_matrix`` (a real crash-and-resume per cell, a few seconds). ``strategies``
    defaults to every registered one; ``reconcile`` adds a learner's function as one more
    column, "my reconcile". ``scenarios`` defaults to the one-call ones (the lessons' matrix;
    ``["send_email+read_file"]`` is the parallel turn's), ``crash_points`` to the points their
    crashed turn passes. ``recorded``: rows made elsewhere (``lab.recorded_matrix()``); those
    of a strategy not run here are drawn too, labelled "<name> (recorded)".
    """

    def __init__(
        self,
        strategies: Iterable[str] | None = None,
        scenarios: Iterable[str] | None = None,
        crash_points: Iterable[str] | None = None,
        reconcile: Reconcile | None = None,
        recorded: Iterable[MatrixRow] = (),
    ) -> None:
        self.strategies = list(STRATEGIES) if strategies is None else list(strategies)
        self.scenarios = one_call_scenarios() if scenarios is None else list(scenarios)
        passed = {p for s in self.scenarios for p in points_passed(SCENARIOS[s].calls)}
        self.crash_points = [p for p in CRASH_POINTS if p in passed] if crash_points is None else list(crash_points)
        self.reconcile = reconcile
        self.recorded = [
            replace(r, strategy=_("{strategy} (recorded)").format(strategy=r.strategy))
            for r in recorded
            if r.strategy not in self.strategies and r.tool in self.scenarios and r.crash_point in self.crash_points
        ]
        self.rows: list[MatrixRow] = []
        cells = sum(len(self._points(s)) for s in self.scenarios)
        total = cells * (len(self.strategies) + (reconcile is not None))
        self.run_button = widgets.Button(
            description=_("Compute the matrix ({total} crashes)").format(total=total),
            button_style="primary",
            icon="th",
            layout=widgets.Layout(width="260px"),
        )
        self.run_button.add_class("rs-matrix-run")
        self.progress = widgets.IntProgress(value=0, min=0, max=total, layout=widgets.Layout(width="260px"))
        self.progress.add_class("rs-matrix-progress")
        self.status = _html(
            "rs-matrix-status",
            _help(
                _(
                    "Every crash point × strategy, crashed for real and resumed. "
                    "Colour = what happened to the crashed call; the number = how many times its effect happened."
                )
            ),
        )
        # Hidden until the first matrix is drawn: an Image with no bytes shows a broken-image icon.
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", width="auto", display="none"))
        self.image.add_class("rs-heatmap")
        self.view = widgets.VBox(
            [widgets.HTML(CSS), widgets.HBox([self.run_button, self.progress]), self.status, self.image],
            layout=widgets.Layout(border="1px solid #ddd", padding="8px", width="100%"),
        )
        self.view.add_class("rs-sim")
        self.view.add_class("rs-matrix")
        self.run_button.on_click(self._on_click)

    def _on_click(self, _button: widgets.Button) -> None:
        with contextlib.suppress(Exception):  # compute() shows it in the widget; never to stderr
            self.compute()

    def _points(self, scenario: str) -> list[str]:
        """The crash points of ``scenario`` this heatmap crashes: those its crashed turn passes."""
        passed = points_passed(SCENARIOS[scenario].calls)
        return [p for p in self.crash_points if p in passed]

    def _rows(self) -> list[MatrixRow]:
        """Run the matrix, ticking the progress bar; the learner's column is labelled "my reconcile"."""

        def tick(_row: MatrixRow) -> None:
            self.progress.value += 1

        strategies: list[str | Reconcile] = list(self.strategies)
        if self.reconcile is not None:
            strategies.append(self.reconcile)
        rows = [
            row
            for scenario in self.scenarios
            for row in run_matrix(
                strategies=strategies, scenarios=[scenario], crash_points=self._points(scenario), progress=tick
            )
        ]
        if self.reconcile is not None:
            mine = getattr(self.reconcile, "__name__", MY_RECONCILE)
            for r in rows:
                if r.strategy == mine and mine not in self.strategies:
                    r.strategy = _(MY_RECONCILE)
        return rows

    def compute(self) -> list[MatrixRow]:
        """Run the matrix, draw the heatmap with the recorded rows, return them all."""
        self.run_button.disabled = True
        self.progress.value = 0
        self.status.value = _help(_("Crashing and resuming…"), italic=True)
        try:
            rows = self._rows() + self.recorded
            self.image.value = heatmap_png(rows)
            self.image.layout.display = ""
        except Exception as e:
            self.status.value = _error_box(e, "")
            raise
        finally:
            self.run_button.disabled = False
        self.rows = rows
        dup = sum(1 for r in rows if cell_category(r) == DUPLICATE)
        err = sum(1 for r in rows if r.api_error)
        recorded = (
            _(" ({count} of them recorded, not run here)").format(count=len(self.recorded)) if self.recorded else ""
        )
        self.status.value = _help(
            _(
                "{cells} cells{recorded}: <b>{dup}</b> repeated a side effect (a duplicate email), "
                "<b>{err}</b> were refused by the API (400). Bold row: <code>after_tool</code>, the postmortem's crash."
            ).format(cells=len(rows), recorded=recorded, dup=dup, err=err)
            + (
                _(" Row <code>between_tools</code>: the turn's first call answered and saved, the next not run yet.")
                if "between_tools" in self.crash_points
                else ""
            )
        )
        return rows

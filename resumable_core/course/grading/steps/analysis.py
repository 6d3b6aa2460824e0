"""Item analysis: for each check, how much of the class failed it, with which messages, and which checks fail
together (the Jaccard index of their failing students), with a students x checks heatmap."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from .. import csvfile

TOP_MESSAGES = 3
"""The failure messages kept per check, most common first."""
TOGETHER = 0.5
"""Two checks "fail together" when their failing students' Jaccard index is at least this (and two students share it)."""
NO_MESSAGE = "(no error shown: zeroed by the re-check, or graded by hand)"


@dataclass(frozen=True)
class Outcome:
    """One student's result on one autograded check."""

    student: str
    check: str
    score: float
    max_score: float
    message: str | None = None
    """The first line of why it failed (None: it passed, or nothing was shown)."""

    @property
    def failed(self) -> bool:
        return self.score < self.max_score


@dataclass
class CheckStats:
    """One check's row: its points, how many of the class took it and failed it, and the commonest messages."""

    check: str
    points: float
    students: int = 0
    failed: int = 0
    messages: list[tuple[str, int]] = field(default_factory=list)

    @property
    def share_failed(self) -> float:
        return self.failed / self.students if self.students else 0.0


@dataclass
class ItemAnalysis:
    """The class's checks in notebook order, their stats, the pairs that fail together, every student's fraction per check."""

    checks: list[CheckStats]
    together: list[tuple[str, str, float, int]]
    """(check, check, Jaccard index, students failing both), strongest first."""
    fractions: dict[str, dict[str, float]]
    """{student: {check: score / max}}."""
    totals: dict[str, float]
    """{student: their score summed over the checks}."""


def analyse(outcomes: Iterable[Outcome]) -> ItemAnalysis:
    """The item analysis of ``outcomes`` (checks keep the order they first appear in)."""
    rows = list(outcomes)
    checks: dict[str, CheckStats] = {}
    messages: dict[str, Counter[str]] = {}
    failing: dict[str, set[str]] = {}
    fractions: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    for o in rows:
        stats = checks.setdefault(o.check, CheckStats(o.check, o.max_score))
        stats.students += 1
        fractions.setdefault(o.student, {})[o.check] = o.score / o.max_score if o.max_score else 1.0
        totals[o.student] = totals.get(o.student, 0.0) + o.score
        if o.failed:
            stats.failed += 1
            failing.setdefault(o.check, set()).add(o.student)
            messages.setdefault(o.check, Counter())[(o.message or NO_MESSAGE).splitlines()[0][:160]] += 1
    for name, stats in checks.items():
        stats.messages = messages.get(name, Counter()).most_common(TOP_MESSAGES)
    together = []
    for a, b in combinations(checks, 2):
        fa, fb = failing.get(a, set()), failing.get(b, set())
        both = len(fa & fb)
        if both >= 2 and both / len(fa | fb) >= TOGETHER:
            together.append((a, b, round(both / len(fa | fb), 2), both))
    together.sort(key=lambda t: (-t[2], -t[3], t[0], t[1]))
    return ItemAnalysis(list(checks.values()), together, fractions, totals)


def write_csv(path: Path, result: ItemAnalysis) -> None:
    """``item-analysis.csv``: a row per check (its commonest messages with their counts in one column)."""
    header = ["check", "points", "students", "failed", "share_failed", "common_failures"]
    rows = [
        [
            c.check,
            f"{c.points:g}",
            c.students,
            c.failed,
            f"{c.share_failed:.2f}",
            " | ".join(f"{n}x {m}" for m, n in c.messages),
        ]
        for c in result.checks
    ]
    csvfile.write_csv(path, header, rows)


def plot(path: Path, result: ItemAnalysis, assignment: str) -> None:
    """``item-analysis.png``: the students x checks heatmap (score / max) beside the class's score histogram."""
    from matplotlib.figure import Figure  # imported here: only the end of a run draws; no pyplot, no backend to set

    students = sorted(result.fractions)
    names = [c.check for c in result.checks]
    grid = [[result.fractions[s].get(c, float("nan")) for c in names] for s in students]
    height = max(3.0, 0.25 * len(students) + 1.5)
    fig = Figure(figsize=(max(8.0, 0.45 * len(names) + 5), height))
    heat, hist = fig.subplots(1, 2, width_ratios=(3, 1))
    image = heat.imshow(grid or [[float("nan")]], aspect="auto", cmap="RdYlGn", vmin=0, vmax=1, interpolation="nearest")
    heat.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    heat.set_yticks(range(len(students)), students, fontsize=7 if len(students) < 40 else 4)
    heat.set_title(f"{assignment}: each student's share of each check's points", fontsize=9)
    fig.colorbar(image, ax=heat, fraction=0.03)
    hist.hist(list(result.totals.values()) or [0], bins=min(20, max(5, len(students))), color="#4c72b0")
    hist.set_title("the class's scores", fontsize=9)
    hist.set_xlabel("score (autograded checks)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_html(path: Path, result: ItemAnalysis, assignment: str, picture: str) -> None:
    """``item-analysis.html``: the table, the pairs that fail together and the picture (every text escaped)."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(c.check)}</td><td>{c.points:g}</td><td>{c.failed}/{c.students}</td>"
        f"<td>{c.share_failed:.0%}</td><td>{'<br>'.join(f'{n}&times; {e(m)}' for m, n in c.messages)}</td></tr>"
        for c in result.checks
    )
    pairs = (
        "".join(
            f"<li><b>{e(a)}</b> and <b>{e(b)}</b>: {n} students fail both (Jaccard {j:.2f})</li>"
            for a, b, j, n in result.together
        )
        or "<li>none</li>"
    )
    path.write_text(
        f"<!doctype html><meta charset='utf-8'><title>{e(assignment)}: item analysis</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px;"
        "vertical-align:top}table{border-collapse:collapse}</style>"
        f"<h1>{e(assignment)}: item analysis</h1>"
        "<table><tr><th>check</th><th>points</th><th>failed</th><th>share</th><th>commonest failures</th></tr>"
        f"{rows}</table><h2>Checks that fail together</h2><ul>{pairs}</ul>"
        f"<h2>Students &times; checks</h2><img src='{e(picture)}' alt='heatmap and score histogram'>",
        encoding="utf-8",
    )


def write(folder: Path, outcomes: Iterable[Outcome], assignment: str) -> ItemAnalysis:
    result = analyse(outcomes)
    write_csv(folder / "item-analysis.csv", result)
    plot(folder / "item-analysis.png", result, assignment)
    write_html(folder / "item-analysis.html", result, assignment, "item-analysis.png")
    return result

"""Similarity: pairs of submissions whose answer cells are suspiciously alike, with their shared code side by side.

Each student's answer code (the notebook's solution code cells, by ``grade_id`` in the release's
order) is normalised through Python's AST: comments and layout go, and every number becomes 0
(``ast.unparse``); copydetect's tokenizer then replaces names with ``V``/``F``/``O`` and strings with
``S`` and fingerprints the result by winnowing (k-grams of :data:`NOISE` tokens, a window of
:data:`WINDOW`). The release's own code (the templates and signatures every learner starts from) is
subtracted as boilerplate. A pair is listed when either side's share of its code found in the
other reaches ``threshold``; ``similarity.html`` shows each pair's normalised code side by side,
the shared stretches marked, and ``similarity.csv`` every pair at or over the threshold.
A listing is evidence for a human to read, never a grade.
"""

from __future__ import annotations

import ast
import html
import io
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from . import csvfile

NOISE, WINDOW = 25, 1
"""copydetect's noise threshold (k, in filtered characters) and winnowing window: its own defaults."""
THRESHOLD = 0.6
CODE_CAP = 200_000
"""Characters of a student's answer code that are compared (a larger answer is cut, and the page says so)."""


class _Literals(ast.NodeTransformer):
    """Every number becomes 0 (strings are copydetect's to replace): a changed constant hides no copy."""

    def visit_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Constant(0), node)
        return node


def normalise(code: str) -> str:
    """``code`` through the AST (comments, layout and numbers gone); as it is when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code
    try:
        return ast.unparse(_Literals().visit(tree))
    except RecursionError:
        return code


def answer_code(nb: Any, answer_ids: list[str]) -> str:
    """The notebook's answer cells (solution code cells of ``answer_ids``), joined in that order."""
    from .. import notebooks  # here: nbgrader loads only when answers are read, not when the CLI parses

    by_id = {
        notebooks.grade_id(c): notebooks.source(c)
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code" and notebooks.is_solution(c)
    }
    return "\n\n".join(by_id[gid] for gid in answer_ids if gid in by_id)


def answer_ids(release: Any) -> list[str]:
    """The ``grade_id`` of every solution code cell of the released notebook, in order."""
    from .. import notebooks  # here: nbgrader loads only when answers are read, not when the CLI parses

    return [
        gid
        for c in release.cells
        if c.get("cell_type") == "code" and notebooks.is_solution(c) and (gid := notebooks.grade_id(c))
    ]


@dataclass(frozen=True)
class Pair:
    """Two students whose answers are alike: each side's share found in the other, the shared stretches of each."""

    a: str
    b: str
    share_a: float
    share_b: float
    slices_a: list[tuple[int, int]]
    slices_b: list[tuple[int, int]]

    @property
    def share(self) -> float:
        return max(self.share_a, self.share_b)


def _fingerprint(name: str, code: str, boilerplate: Any) -> Any:
    from copydetect import CodeFingerprint

    return CodeFingerprint(
        f"{name}.py", NOISE, WINDOW, boilerplate=boilerplate, fp=io.StringIO(code), language="python"
    )


def _boilerplate(code: str) -> Any:
    """The release's k-gram hashes (every one: a window of 1), as copydetect takes boilerplate: a sorted array."""
    import numpy as np

    return np.unique(np.array(sorted(_fingerprint("release", code, None).hashes), dtype=np.int64))


def similar_pairs(codes: dict[str, str], release_code: str, threshold: float = THRESHOLD) -> list[Pair]:
    """The pairs of ``codes`` ({student: normalised answer code}) at or over ``threshold``, most alike first."""
    from copydetect import compare_files

    boilerplate = _boilerplate(release_code)
    prints = {s: _fingerprint(s, code, boilerplate) for s, code in codes.items() if code.strip()}
    pairs = []
    for a, b in combinations(sorted(prints), 2):
        _, (share_a, share_b), (slices_a, slices_b) = compare_files(prints[a], prints[b])
        if max(share_a, share_b) >= threshold:
            pairs.append(Pair(a, b, float(share_a), float(share_b), _spans(slices_a), _spans(slices_b)))
    return sorted(pairs, key=lambda p: (-p.share, p.a, p.b))


def _spans(slices: Any) -> list[tuple[int, int]]:
    """copydetect's 2 x N array of (starts, ends); an empty 1-D array when nothing is shared."""
    if getattr(slices, "ndim", 0) != 2:
        return []
    return [(int(s), int(e)) for s, e in zip(slices[0], slices[1], strict=True)]


def _marked(code: str, spans: list[tuple[int, int]]) -> str:
    """``code`` escaped, the shared stretches in ``<mark>``."""
    out, at = [], 0
    for start, end in sorted(spans):
        start = max(start, at)
        out += [html.escape(code[at:start]), "<mark>", html.escape(code[start:end]), "</mark>"]
        at = max(at, end)
    out.append(html.escape(code[at:]))
    return "".join(out)


def write(
    folder: Path, codes: dict[str, str], pairs: list[Pair], assignment: str, threshold: float, cut: list[str]
) -> None:
    """``similarity.csv`` (every pair listed) and ``similarity.html`` (each pair's code side by side)."""
    rows = [[p.a, p.b, f"{p.share_a:.2f}", f"{p.share_b:.2f}"] for p in pairs]
    csvfile.write_csv(folder / "similarity.csv", ["student_a", "student_b", "share_a", "share_b"], rows)
    e = html.escape
    sections = "".join(
        f"<h2>{e(p.a)} and {e(p.b)}: {p.share_a:.0%} of {e(p.a)}'s code is in {e(p.b)}'s, "
        f"{p.share_b:.0%} of {e(p.b)}'s in {e(p.a)}'s</h2><table><tr><th>{e(p.a)}</th><th>{e(p.b)}</th></tr>"
        f"<tr><td><pre>{_marked(codes[p.a], p.slices_a)}</pre></td><td><pre>{_marked(codes[p.b], p.slices_b)}</pre></td>"
        "</tr></table>"
        for p in pairs
    )
    note = f"<p>Answers cut at {CODE_CAP:,} characters: {e(', '.join(cut))}.</p>" if cut else ""
    (folder / "similarity.html").write_text(
        f"<!doctype html><meta charset='utf-8'><title>{e(assignment)}: similar answers</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{vertical-align:top;border:1px solid #ccc;width:50%}"
        "table{border-collapse:collapse;width:100%}pre{white-space:pre-wrap;font-size:12px}"
        "mark{background:#ffd54f}</style>"
        f"<h1>{e(assignment)}: pairs of answers at least {threshold:.0%} alike</h1>"
        f"<p>{len(pairs)} pair(s) of {len(codes)} submissions. The code is shown normalised (no comments, numbers as 0); "
        "names and strings are ignored when comparing, and the release's own code is subtracted. "
        "Read each pair before concluding anything: short answers to one task can be alike by nature.</p>"
        f"{note}{sections or '<p>No pair reaches the threshold.</p>'}",
        encoding="utf-8",
    )


def class_similarity(
    folder: Path, files: dict[str, Path], releases: dict[str, Any], assignment: str, threshold: float = THRESHOLD
) -> list[Pair]:
    """Compare every student's answers (``files``: {student: their notebook}, one release notebook each) and write the report."""
    from .. import notebooks

    (name, release), *_ = sorted(releases.items())
    ids = answer_ids(release)
    release_code = normalise(answer_code(release, ids))
    codes: dict[str, str] = {}
    cut: list[str] = []
    for student, path in sorted(files.items()):
        try:
            code = answer_code(notebooks.read(path), ids)
        except (OSError, ValueError):  # not a notebook: refused elsewhere, nothing to compare
            continue
        if len(code) > CODE_CAP:
            code, cut = code[:CODE_CAP], [*cut, student]
        codes[student] = normalise(code)
    pairs = similar_pairs(codes, release_code, threshold)
    write(folder, codes, pairs, f"{assignment} ({name}.ipynb)", threshold, cut)
    return pairs

"""Similarity: pairs of submissions whose answer cells are suspiciously alike, with their shared code side by side.

Each answer cell is normalised (:func:`own_code`: no comments, numbers as 0, the release's lines gone, so a stub
is never shared code) and fingerprinted by copydetect; a k-gram common in the class is ignored. A listing is
evidence for a human to read, never a grade (precision and recall: docs/running-a-class.md).
"""

from __future__ import annotations

import ast
import html
import io
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from .. import csvfile

NOISE, WINDOW = 25, 1
"""copydetect's noise threshold (k, in filtered characters) and winnowing window: its own defaults."""
THRESHOLD = 0.6
MIN_CODE = 60
"""Tokens (copydetect's filtered characters: ``V=V.V`` is five) a cell's own code needs to be compared: two
short answers to one task are alike by nature (``if V is None: return V`` is 20)."""
COMMON, COMMON_MIN = 0.1, 4
"""A k-gram in the compared code of more than this share of the class, and of more than ``COMMON_MIN``
students, is ignored: what many write alike is how the task is done, no sign of a copy (MOSS's ``-m``)."""
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
        return ast.unparse(_Literals().visit(ast.parse(code)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code


def own_code(code: str, release: str) -> str:
    """``code`` normalised, less every line the release's cell ``release`` has (normalised or as written)."""
    theirs = {line.strip() for line in (normalise(release) + "\n" + release).splitlines()}
    return "\n".join(line for line in normalise(code).splitlines() if line.strip() not in theirs)


def forced(code: str) -> bool:
    """Whether ``code`` is literals only, assigned or written (Level 1's dictionary): the task dictates it."""
    try:
        body = ast.parse(code).body
        for node in body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) or node.value is None:
                return False
            ast.literal_eval(node.value)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):  # not literals, or not Python
        return False
    return bool(body)


def _tokens(code: str) -> int:
    """How many of copydetect's filtered characters ``code`` has (names, strings: one each; no layout)."""
    from copydetect.utils import filter_code

    return len(filter_code(code, "answer.py", "python")[0])


def compared_code(nb: Any, release: dict[str, str]) -> str:
    """The learner's own code of each answer cell worth comparing (``release``: {grade_id: its stub}), each under
    a ``# <grade_id>`` line."""
    from ... import notebooks  # here: nbgrader loads only when answers are read, not when the CLI parses

    theirs = {
        notebooks.grade_id(c): notebooks.source(c)
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code" and notebooks.is_solution(c)
    }
    parts = []
    for gid, stub in release.items():
        code = own_code(theirs.get(gid) or stub, stub)
        if _tokens(code) >= MIN_CODE and not forced(code):
            parts.append(f"# {gid}\n{code}")
    return "\n\n".join(parts)


def release_cells(release: Any) -> dict[str, str]:
    """{grade_id: source} of every solution code cell of the released notebook, in order."""
    from ... import notebooks  # here: nbgrader loads only when answers are read, not when the CLI parses

    return {
        gid: notebooks.source(c)
        for c in release.cells
        if c.get("cell_type") == "code" and notebooks.is_solution(c) and (gid := notebooks.grade_id(c))
    }


@dataclass(frozen=True)
class Pair:
    """Two students whose answers are alike: the code they share, each side's share of it, the shared stretches."""

    a: str
    b: str
    matched: int
    """Tokens of ``a``'s compared code found in ``b``'s (copydetect's filtered characters)."""
    share_a: float
    share_b: float
    slices_a: list[tuple[int, int]]
    slices_b: list[tuple[int, int]]

    @property
    def share(self) -> float:
        return max(self.share_a, self.share_b)


def _fingerprint(name: str, code: str) -> Any:
    from copydetect import CodeFingerprint

    return CodeFingerprint(f"{name}.py", NOISE, WINDOW, fp=io.StringIO(code), language="python")


def _without(fingerprint: Any, common: set[int]) -> Any:
    """``fingerprint`` less the k-grams ``common`` (copydetect's own ``boilerplate`` also drops a k-gram's repeats)."""
    from copydetect.utils import get_token_coverage

    fingerprint.hashes -= common
    fingerprint.hash_idx = {h: at for h, at in fingerprint.hash_idx.items() if h not in common}
    fingerprint.token_coverage = get_token_coverage(fingerprint.hash_idx, fingerprint.k, len(fingerprint.filtered_code))
    return fingerprint


def similar_pairs(codes: dict[str, str], threshold: float = THRESHOLD) -> list[Pair]:
    """The pairs of ``codes`` ({student: compared code}) at or over ``threshold``, the most code shared first."""
    from copydetect import compare_files

    prints = {s: _fingerprint(s, code) for s, code in codes.items() if code.strip()}
    seen = Counter(h for fingerprint in prints.values() for h in fingerprint.hashes)
    limit = max(COMMON_MIN, COMMON * len(prints))
    common = {h for h, n in seen.items() if n > limit}
    prints = {s: _without(fingerprint, common) for s, fingerprint in prints.items()}
    pairs = []
    for a, b in combinations(sorted(prints), 2):
        if not prints[a].hashes & prints[b].hashes:  # nothing shared: skip copydetect's arrays
            continue
        matched, (share_a, share_b), (slices_a, slices_b) = compare_files(prints[a], prints[b])
        if max(share_a, share_b) >= threshold:
            pair = Pair(a, b, int(matched), float(share_a), float(share_b), _spans(slices_a), _spans(slices_b))
            pairs.append(pair)
    return sorted(pairs, key=lambda p: (-p.matched, -p.share, p.a, p.b))


def _spans(slices: Any) -> list[tuple[int, int]]:
    """copydetect's 2 x N array of (starts, ends); an empty 1-D array when nothing is shared."""
    if getattr(slices, "ndim", 0) != 2:
        return []
    return [(int(s), int(e)) for s, e in zip(slices[0], slices[1], strict=True)]


def _marked(code: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in sorted(spans):
        start = max(start, at)
        out += [html.escape(code[at:start]), "<mark>", html.escape(code[start:end]), "</mark>"]
        at = max(at, end)
    out.append(html.escape(code[at:]))
    return "".join(out)


def write(
    folder: Path, codes: dict[str, str], pairs: list[Pair], assignment: str, threshold: float, cut: list[str]
) -> Path:
    """``similarity.csv`` (every pair listed) and ``similarity.html`` (each pair's code side by side); the page."""
    rows = [[p.a, p.b, p.matched, f"{p.share_a:.2f}", f"{p.share_b:.2f}"] for p in pairs]
    csvfile.write_csv(folder / "similarity.csv", ["student_a", "student_b", "matched", "share_a", "share_b"], rows)
    e = html.escape
    sections = "".join(
        f"<h2>{e(p.a)} and {e(p.b)}: {p.matched} tokens shared; {p.share_a:.0%} of {e(p.a)}'s compared code is in "
        f"{e(p.b)}'s, {p.share_b:.0%} of {e(p.b)}'s in {e(p.a)}'s</h2><table><tr><th>{e(p.a)}</th><th>{e(p.b)}</th></tr>"
        f"<tr><td><pre>{_marked(codes[p.a], p.slices_a)}</pre></td><td><pre>{_marked(codes[p.b], p.slices_b)}</pre></td>"
        "</tr></table>"
        for p in pairs
    )
    note = f"<p>Answers cut at {CODE_CAP:,} characters: {e(', '.join(cut))}.</p>" if cut else ""
    compared = sum(1 for c in codes.values() if c.strip())
    page = folder / "similarity.html"
    page.write_text(
        f"<!doctype html><meta charset='utf-8'><title>{e(assignment)}: similar answers</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{vertical-align:top;border:1px solid #ccc;width:50%}"
        "table{border-collapse:collapse;width:100%}pre{white-space:pre-wrap;font-size:12px}"
        "mark{background:#ffd54f}</style>"
        f"<h1>{e(assignment)}: pairs of answers at least {threshold:.0%} alike</h1>"
        f"<p>{len(pairs)} pair(s) of {compared} submissions with code to compare ({len(codes)} read), the most "
        "code shared first. Compared: each answer cell's own code, normalised (no comments, numbers as 0), "
        "less every line of the release's cell (its stub too); names and strings are ignored, and so is code "
        f"found in more than {COMMON:.0%} of the class. Left out: a cell under {MIN_CODE} tokens (too small to "
        "tell apart) or of literals only (an answer the task dictates). "
        "Read each pair before concluding anything.</p>"
        f"{note}{sections or '<p>No pair reaches the threshold.</p>'}",
        encoding="utf-8",
    )
    return page


def class_similarity(
    folder: Path, files: dict[str, Path], releases: dict[str, Any], assignment: str, threshold: float = THRESHOLD
) -> list[Pair]:
    """Compare every student's answers (``files``: {student: their notebook}, one release notebook each) and write the report."""
    from ... import notebooks

    (name, release), *_ = sorted(releases.items())
    stubs = release_cells(release)
    codes: dict[str, str] = {}
    cut: list[str] = []
    for student, path in sorted(files.items()):
        try:
            code = compared_code(notebooks.read(path), stubs)
        except (OSError, ValueError):  # not a notebook: refused elsewhere, nothing to compare
            continue
        if len(code) > CODE_CAP:
            code, cut = code[:CODE_CAP], [*cut, student]
        codes[student] = code
    pairs = similar_pairs(codes, threshold)
    write(folder, codes, pairs, f"{assignment} ({name}.ipynb)", threshold, cut)
    return pairs

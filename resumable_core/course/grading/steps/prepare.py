"""Step 3 of grading: check and repair each notebook before nbgrader sees it, so the release, not the
submission, says what is graded and how; the repaired notebooks go to ``<out>/submitted/``."""

from __future__ import annotations

import ast
import copy
import functools
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat

from resumable_core.lab import i18n
from resumable_core.lab.editions import same_code, without_comments

from ... import notebooks
from ...assignments import ASSIGNMENTS
from ...notebook_cells import read
from ...release import notebook_path
from .. import reasons
from ..i18n import GRADING
from ..model import Status, Submission

_SUSPICIOUS_CALLS = frozenset({"setattr", "set_custom_exc", "_exit", "reload", "delattr"})
_WATCHED_MODULES = frozenset({"sys", "builtins", "os", "resumable_core", "rc"})
"""Modules whose attributes a learner has no business assigning (more: whatever the learner imports)."""
MAX_FILE_BYTES = 32 * 2**20
"""A submitted file larger than this is refused unread (parsing it could exhaust the grader's memory)."""
MAX_CONTENT_BYTES = 2 * 2**20
"""A notebook's code and text (its outputs stripped) larger than this is refused."""
NOTED_OUTPUT_BYTES = 2**20
"""Stripped outputs larger than this are noted (nbgrader clears every output before it runs the cells anyway)."""
SUBMISSION_SECRET, MAX_SECRET_BYTES = "submission_secret.txt", 1024
"""nbgrader's exchange's secret of a submission (``nbgrader release_feedback`` names the feedback by it), and its cap."""
_GRADING_KEYS = ("grade", "solution", "locked", "task", "points")
"""The nbgrader metadata that decides how a cell is graded (a change in the others is not worth a note)."""


def _in_language_of(path: Path) -> Callable[[str], str]:
    """The grading catalog's words in the language of the edition at ``path`` (a ``ko/`` folder), for a file not read."""
    lang = path.parent.name if path.parent.name in i18n.TRANSLATIONS else i18n.DEFAULT
    return lambda message: GRADING.gettext(message, lang)


def _json_text(raw: bytes) -> bool:
    """Whether ``raw`` is JSON text in an encoding other than UTF-8 (Latin-1 decodes any bytes, so it comes last)."""
    for encoding in ("utf-16", "latin-1"):
        try:
            json.loads(raw.decode(encoding))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        return True
    return False


def read_notebook(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The notebook, or why it is not one (a file over :data:`MAX_FILE_BYTES` is not read)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return None, reasons.file_too_large(size, MAX_FILE_BYTES)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except UnicodeDecodeError:  # JSON in another encoding (Latin-1, UTF-16) is a notebook saved wrong; a PDF is none
        if not _json_text(raw):
            return None, reasons.not_json(path.name)
        return None, reasons.refused(reasons.NOT_UTF8, _in_language_of(path), file=path.name)
    except json.JSONDecodeError:
        return None, reasons.not_json(path.name)
    if not isinstance(data, dict) or "cells" not in data:
        return None, reasons.NO_CELLS
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    # besides its own two errors, upgrading an old or malformed notebook trips over missing keys and wrong types
    except (nbformat.ValidationError, nbformat.NBFormatError, KeyError, TypeError, ValueError, AttributeError) as e:
        return None, reasons.fails_validation(type(e).__name__)
    return nb, None


def other_assignment(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> str | None:
    """The course's other assignment whose notebook ``nb`` is, or None: the one whose source shares more of its cells
    (by id or ``grade_id``) than ``release`` does. Graded as this one's, it would only score 0, unexplained."""
    keys = {key for c in nb.cells for key in _keys(c)}
    ours = len(keys & {key for c in release.cells for key in _keys(c)})
    shared, name = max(((len(keys & _source_keys(name)), name) for name in ASSIGNMENTS), default=(0, ""))
    return name if shared > ours else None


@functools.cache
def _source_keys(assignment: str) -> frozenset[str]:
    """How the cells of ``assignment``'s source notebook are known (:func:`_keys`); none if it is not there."""
    source = read(notebook_path(assignment))
    return frozenset(key for c in (source or {}).get("cells", []) for key in _keys(c))


def strip_outputs(nb: nbformat.NotebookNode) -> int:
    """Clear every code cell's outputs and execution count, as nbgrader's autograde does first; the bytes cleared."""
    cleared = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            cleared += len(json.dumps(cell.get("outputs", [])))
            cell.outputs, cell.execution_count = [], None
    return cleared


def repair_metadata(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """Give every cell the release's nbgrader metadata for its ``grade_id``; what was wrong, one phrase each.

    A cell naming no released ``grade_id``, or one already seen, becomes a plain learner cell: nbgrader
    would fail the whole notebook, or keep the last copy.
    """
    released = {gid: c.metadata["nbgrader"] for c in release.cells if (gid := notebooks.grade_id(c))}
    seen: set[str] = set()
    plain, restored = [], []
    for i, cell in enumerate(nb.cells, start=1):
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        gid = notebooks.grade_id(cell)
        if gid not in released or gid in seen:
            del cell.metadata["nbgrader"]
            plain.append(f"cell {i}" + (f" ({gid})" if gid else ""))
            continue
        seen.add(gid)
        if any(meta.get(k) != released[gid].get(k) for k in _GRADING_KEYS):
            restored.append(gid)
        cell.metadata["nbgrader"] = copy.deepcopy(released[gid])
    notes = []
    if plain:
        notes.append(reasons.metadata_dropped(plain))
    if restored:
        notes.append(reasons.metadata_put_back(restored))
    return notes


def restore_cells(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """Put back the instructor's cells the learner deleted, each after the instructor's cell before it; their ids."""
    present = {notebooks.grade_id(c) for c in nb.cells} - {None}
    restored = []
    position = -1  # index in nb after which the next instructor cell goes
    for released in release.cells:
        gid = notebooks.grade_id(released)
        if gid is None:
            continue
        if gid in present:
            position = next(i for i, c in enumerate(nb.cells) if notebooks.grade_id(c) == gid)
            continue
        cell = copy.deepcopy(released)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nb.cells.insert(position + 1, cell)
        position += 1
        restored.append(gid)
    return restored


def edited_locked_cells(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """The ids of the instructor's locked cells whose source the learner changed (nbgrader puts them back; this
    only says so). Another edition is compared by its locked code without comments: its text is its language's."""
    other_edition = notebooks.language(nb) != notebooks.language(release)
    released = {  # another edition's text is its language's: only its code must match
        gid: c.source
        for c in release.cells
        if (gid := notebooks.grade_id(c)) and notebooks.is_locked(c) and not (other_edition and c.cell_type != "code")
    }
    return [
        gid
        for c in nb.cells
        if (gid := notebooks.grade_id(c)) in released
        and not (same_code(released[gid], c.source) if other_edition else c.source.strip() == released[gid].strip())
    ]


def _parse(source: str) -> ast.Module | None:
    """The cell as Python, IPython magics and shell escapes left out; None if it does not parse."""
    lines = (line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _flags(tree: ast.Module, modules: set[str]) -> list[str]:
    """Attribute assignments on ``modules`` (and sys/builtins) and calls of the suspicious functions."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            dotted = ast.unparse(target)
            if isinstance(target, ast.Attribute) and (
                dotted.split(".")[0] in modules or dotted.startswith(("sys.", "builtins."))
            ):
                found.append(f"assigns {dotted}")
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in _SUSPICIOUS_CALLS:
                found.append(f"calls {ast.unparse(node.func)}()")
    return found


def suspicious(nb: nbformat.NotebookNode) -> list[str]:
    """What the learner's code does that a reviewer should look at (monkeypatching, exits): flags only, never a score.
    Its code is every code cell neither locked by the instructor nor a graded test."""
    found: list[str] = []
    modules = set(_WATCHED_MODULES)
    mine = [c for c in nb.cells if c.cell_type == "code" and not notebooks.is_locked(c) and not notebooks.is_grade(c)]
    for tree in filter(None, (_parse(notebooks.source(c)) for c in mine)):
        imports = (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
        modules |= {(a.asname or a.name).split(".")[0] for n in imports for a in n.names}  # later cells see them
        found += _flags(tree, modules)
    return sorted(set(found))


def learner_part(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """Each cell's type and source, less the release's markdown and its locked code's comments (the edition's
    language), known by cell id or ``grade_id``: a notebook saved as nbformat 4.4, with no cell ids, is no edit."""
    text = {
        key for c in release.cells if c.cell_type == "markdown" and not notebooks.is_solution(c) for key in _keys(c)
    }
    locked = {key for c in release.cells if c.cell_type == "code" and notebooks.is_locked(c) for key in _keys(c)}

    def part(c: nbformat.NotebookNode) -> str:
        if c.cell_type == "markdown" and not text.isdisjoint(_keys(c)):
            return ""
        if c.cell_type == "code" and not locked.isdisjoint(_keys(c)):
            code = without_comments(notebooks.source(c))  # "" for a cell of comments only (a hidden test's note)
            return notebooks.source(c) if code is None else code
        return notebooks.source(c)

    return [(c.cell_type, part(c)) for c in nb.cells]


def _keys(cell: Any) -> set[str]:
    """How a cell is known across editions: its id and its nbgrader ``grade_id``, as far as it has them."""
    nbgrader = cell.get("metadata", {}).get("nbgrader")
    grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    return {
        f"{kind}:{key}"
        for kind, key in (("id", cell.get("id")), ("grade_id", grade_id))
        if isinstance(key, str) and key
    }


def was_edited(path: Path, release: nbformat.NotebookNode) -> bool:
    """Whether the learner changed the notebook at ``path`` from the (English) release; a file that is no notebook counts."""
    nb = read_notebook(path)[0]
    return nb is None or learner_part(nb, release) != learner_part(release, release)


def choose_translation(sub: Submission, name: str, release: nbformat.NotebookNode) -> tuple[Path | None, str | None]:
    """Which of notebook ``name`` and its translations (nbgrader's exchange hands out both) is graded: the one edited;
    none, the English one. (its path, None), or (None, why ``sub`` is refused, in the translation's language) when
    more than one was edited."""
    found = dict(sorted(sub.translations.get(name, {}).items()))
    if name in sub.files:
        found = {i18n.DEFAULT: sub.files[name], **found}
    changed = [lang for lang, path in found.items() if was_edited(path, release)] if len(found) > 1 else list(found)
    if len(changed) > 1:
        lang = next(code for code in changed if code != i18n.DEFAULT)
        files = ", ".join(f"{name}.ipynb" if code == i18n.DEFAULT else f"{code}/{name}.ipynb" for code in changed)
        return None, reasons.refused(
            reasons.TRANSLATIONS_EDITED, functools.partial(GRADING.gettext, lang=lang), files=files
        )
    return found[changed[0] if changed else next(iter(found))], None


Checked = tuple[Status, list[str], list[str]]
"""What checking one notebook showed: the submission's status by it, its problems, its notes."""


def _prepare_notebook(path: Path, name: str, release: nbformat.NotebookNode, dest: Path) -> Checked:
    """Check, repair and flag the notebook at ``path``, and write it to ``dest`` if it is one."""
    nb, problem = read_notebook(path)
    if nb is None:
        return "invalid", [str(problem)], []
    other = other_assignment(nb, release)
    if other is not None:
        words = functools.partial(GRADING.gettext, lang=notebooks.language(nb))
        why = reasons.refused(reasons.OTHER_ASSIGNMENT, words, file=path.name, other=other, notebook=name)
        return "invalid", [why], []
    cleared = strip_outputs(nb)
    size = len(nbformat.writes(nb).encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        return "invalid", [reasons.content_too_large(size, MAX_CONTENT_BYTES)], []
    notes = [reasons.outputs_stripped(cleared)] if cleared > NOTED_OUTPUT_BYTES else []
    notes += repair_metadata(nb, release)
    edited = edited_locked_cells(nb, release)  # after the metadata repair: the release's ids and flags
    if edited:
        notes.append(reasons.cells_put_back(edited))
    empty = not any(c.source.strip() for c in nb.cells if c.cell_type == "code")
    restored = restore_cells(nb, release)
    if restored and not empty:
        notes.append(reasons.cells_restored(restored))
    flags = suspicious(nb)
    if flags:
        notes.append(reasons.flagged_for_review(flags))
    dest.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest / f"{name}.ipynb"))
    return ("empty", [reasons.EMPTY_NOTEBOOK], notes) if empty else ("graded", [], notes)


def _prepare(sub: Submission, folder: Path, assignment: str, releases: dict[str, nbformat.NotebookNode]) -> Submission:
    """``sub`` checked (its status, problems and notes), its notebooks repaired into ``folder/<assignment>/``."""
    names = sorted(set(sub.files) | set(sub.translations))
    chosen = {name: choose_translation(sub, name, releases[name]) for name in names}
    refused = [why for _, why in chosen.values() if why]
    files = {name: path for name, (path, _) in chosen.items() if path}
    checked = [] if refused else [_prepare_notebook(p, n, releases[n], folder / assignment) for n, p in files.items()]
    problems = [*sub.problems, *refused, *(p for _, found, _ in checked for p in found)]
    statuses = {status for status, _, _ in checked}
    status: Status = "invalid" if refused or "invalid" in statuses else "empty" if "empty" in statuses else "graded"
    sub = replace(
        sub, files=files, status=status, problems=problems, notes=[*sub.notes, *(n for c in checked for n in c[2])]
    )
    if status == "invalid":
        shutil.rmtree(folder, ignore_errors=True)
    elif sub.timestamp is not None:
        shutil.copy2(sub.timestamp, folder / assignment / "timestamp.txt")
        secret = sub.timestamp.with_name(SUBMISSION_SECRET)
        if secret.is_file() and not secret.is_symlink() and secret.stat().st_size <= MAX_SECRET_BYTES:
            shutil.copy2(secret, folder / assignment / SUBMISSION_SECRET)
    return sub


def prepare(
    subs: list[Submission], out: Path, assignment: str, releases: dict[str, nbformat.NotebookNode]
) -> list[Submission]:
    """Every found submission as checking it showed, its notebooks checked and repaired into the working course's
    ``submitted/`` (one refused before, or by the check, writes none)."""
    return [
        _prepare(s, out / "submitted" / s.student, assignment, releases) if s.status == "graded" else s for s in subs
    ]

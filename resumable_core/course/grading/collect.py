"""Step 2 of grading: find every student's submission in a folder or a zip.

Two layouts: nbgrader's ``submitted/<student>/<assignment>/*.ipynb`` (also one folder down, as a
zip of that folder unpacks) or flat ``<student>.ipynb`` files. What is not a notebook is refused
with a reason; a renamed notebook is graded as the assignment's when it is the student's only one.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .workspace import GradingError

Status = Literal["graded", "failed", "invalid", "empty", "missing"]
"""graded: autograded (the score says how well); failed: nbgrader could not finish the notebook
(score 0); invalid: not a notebook (score 0, not run); empty: a notebook with no code of the learner
(graded like any, it scores what the restored tests give); missing: no notebook for the assignment."""


@dataclass
class Submission:
    """One student's submission as found, and what grading it showed."""

    student: str
    files: dict[str, Path] = field(default_factory=dict)
    """Assignment notebook name (without .ipynb) -> the learner's file."""
    timestamp: Path | None = None
    status: Status = "graded"
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    score: float = 0.0
    max_score: float = 0.0

    @property
    def reason(self) -> str:
        """Everything a reader of grades.csv should know about this submission, on one line."""
        return "; ".join(self.problems + self.notes)

    @property
    def to_grade(self) -> bool:
        """Whether nbgrader runs this submission (an empty notebook is graded too)."""
        return self.status in ("graded", "empty")


_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


def student_id(name: str) -> str:
    """A student id nbgrader and file systems accept."""
    return _UNSAFE.sub("_", name).strip("._") or "student"


def _skip(path: Path) -> bool:
    """Hidden files, macOS zip debris and nbgrader's timestamp are not submissions."""
    return any(part.startswith(".") or part == "__MACOSX" for part in path.parts) or path.name == "timestamp.txt"


def _entries(root: Path) -> tuple[list[Path], list[Path]]:
    """The (files, folders) directly in ``root`` that may be submissions."""
    kept = [p for p in root.iterdir() if not _skip(p.relative_to(root))]
    return [p for p in kept if p.is_file()], [p for p in kept if p.is_dir()]


def extract_zip(path: Path, dest: Path) -> Path:
    """Unpack a zip safely (no absolute paths, no ``..``)."""
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            name = Path(info.filename)
            if info.is_dir() or name.is_absolute() or ".." in name.parts:
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
    return dest


@contextmanager
def unpacked(path: Path) -> Iterator[Path]:
    """The folder to collect from: ``path`` itself, or a zip unpacked for the duration."""
    if path.is_dir():
        yield path
        return
    if not zipfile.is_zipfile(path):
        raise GradingError(f"{path} is neither a folder nor a zip file; pass the class's folder or zip")
    with tempfile.TemporaryDirectory(prefix="grading-unzip-") as tmp:
        yield extract_zip(path, Path(tmp))


def _submitted_root(root: Path, assignment: str) -> Path | None:
    """The folder whose children are ``<student>/<assignment>/``, if the layout is nbgrader's."""
    if (root / "submitted").is_dir():
        return root / "submitted"
    if any((d / assignment).is_dir() for d in root.iterdir() if d.is_dir()):
        return root
    files, folders = _entries(root)
    if len(folders) == 1 and not files:  # a zip with one top folder
        return _submitted_root(folders[0], assignment)
    return None


def _flat_root(root: Path) -> Path:
    """The folder holding flat ``<student>.*`` files (descending through lone top folders)."""
    files, folders = _entries(root)
    if not files and len(folders) == 1:
        return _flat_root(folders[0])
    return root


def _not_a_notebook(files: list[Path]) -> str:
    kinds = sorted({f.suffix or "suffixless" for f in files})
    return f"not a notebook: {' and '.join(kinds)} file{'s' if len(files) > 1 else ''}, no .ipynb"


def _student_folder(sub: Submission, folder: Path, assignment: str, notebooks: list[str]) -> None:
    """Fill ``sub`` from ``<student>/`` in nbgrader's layout."""
    adir = folder / assignment
    if not adir.is_dir():
        sub.status, sub.problems = "missing", [f"no {assignment}/ folder in {folder.name}/"]
        return
    timestamp = adir / "timestamp.txt"
    sub.timestamp = timestamp if timestamp.is_file() else None
    found = sorted(f for f in adir.rglob("*") if f.is_file() and not _skip(f.relative_to(adir)))
    ipynbs = [f for f in found if f.suffix == ".ipynb"]
    sub.files.update({f.stem: f for f in ipynbs if f.stem in notebooks})
    missing = [n for n in notebooks if n not in sub.files]
    extra = [f for f in ipynbs if f.stem not in notebooks]
    if len(missing) == 1 and len(extra) == 1:
        sub.files[missing[0]] = extra[0]
        sub.notes.append(f"renamed notebook {extra[0].name!r} graded as {missing[0]}.ipynb")
    elif not sub.files:
        sub.status = "invalid" if found else "missing"
        sub.problems.append(_not_a_notebook(found) if found else f"no notebook for {assignment}")


def _collect_submitted(submitted: Path, assignment: str, notebooks: list[str]) -> dict[str, Submission]:
    subs: dict[str, Submission] = {}
    for folder in sorted(d for d in submitted.iterdir() if d.is_dir() and not d.name.startswith(".")):
        sid = student_id(folder.name)
        _student_folder(subs.setdefault(sid, Submission(sid)), folder, assignment, notebooks)
    return subs


def _collect_flat(root: Path, notebooks: list[str]) -> dict[str, Submission]:
    subs: dict[str, Submission] = {}
    flat = _flat_root(root)
    for f in sorted(p for p in flat.rglob("*") if p.is_file() and not _skip(p.relative_to(flat))):
        sid = student_id(f.stem)
        if sid in subs:
            subs[sid].notes.append(f"ignored another file {f.name!r}")
            continue
        sub = subs[sid] = Submission(sid)
        if f.suffix == ".ipynb":
            sub.files[notebooks[0]] = f
            if len(notebooks) > 1:
                sub.notes.append(f"flat file graded as {notebooks[0]}.ipynb only")
        else:
            sub.status = "invalid"
            sub.problems.append(_not_a_notebook([f]))
    return subs


def collect(root: Path, assignment: str, notebooks: list[str]) -> list[Submission]:
    """Every student found under ``root`` (already unzipped), sorted by id."""
    submitted = _submitted_root(root, assignment)
    subs = _collect_submitted(submitted, assignment, notebooks) if submitted else _collect_flat(root, notebooks)
    return [subs[k] for k in sorted(subs)]

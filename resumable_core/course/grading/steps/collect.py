"""Step 2 of grading: find every student's submission in a folder or a zip, in nbgrader's layout
(``submitted/<student>/<assignment>/``) or as flat ``<student>.ipynb`` files. Student ids come from the
names the instructor gave, never from a notebook; two names giving one id are both refused."""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ....lab.i18n import TRANSLATIONS
from .. import reasons
from ..errors import GradingError, StudentIdError, check_id
from ..model import Submission
from . import lms as lms_names

_BROWSER_COPY = re.compile(r"^(?P<name>.+?) ?\((?P<n>\d+)\)$")
"""``reconcile (1)``, ``reconcile(2)``: a browser's name for a file downloaded again under a name it already had."""


def student_id(name: str) -> str:
    """The student id a file stem or folder name stands for: accents, spaces and dots at the ends made safe, then
    :func:`check_id`, else :class:`StudentIdError` names the file and why."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    sid = re.sub(r"\s+", "_", plain.strip()).strip("._")
    try:
        return check_id(sid)
    except StudentIdError as e:
        raise StudentIdError(name, e.reason) from None


def resubmission(stem: str) -> tuple[str, int]:
    """``(name, n)`` of a file stem: ``reconcile (2)`` is the browser's second copy of ``reconcile``, the latest of
    a student who downloaded it more than once (the highest ``n`` is the latest); any other stem is ``(stem, 0)``."""
    m = _BROWSER_COPY.match(stem)
    return (m["name"], int(m["n"])) if m else (stem, 0)


def _latest(files: list[Path]) -> list[Path]:
    """``files`` with only the latest copy of each name (:func:`resubmission`)."""
    latest: dict[tuple[Path, str], Path] = {}
    for f in sorted(files, key=lambda f: resubmission(f.stem)[1]):
        latest[(f.parent, resubmission(f.stem)[0] + f.suffix)] = f
    return sorted(latest.values())


def _skip(path: Path) -> bool:
    """Hidden files, macOS zip debris and nbgrader's timestamp are not submissions."""
    return any(part.startswith(".") or part == "__MACOSX" for part in path.parts) or path.name == "timestamp.txt"


def _file(path: Path) -> bool:
    """A regular file that is no link: a link could name any file the grader may read (a solution)."""
    return path.is_file() and not path.is_symlink()


def _folder(path: Path) -> bool:
    """A folder that is no link (:func:`_file`)."""
    return path.is_dir() and not path.is_symlink()


def _links(root: Path) -> list[Path]:
    """Every link under ``root`` (not followed) that is not skipped anyway: each is refused, never read."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            if path.is_symlink() and not _skip(path.relative_to(root)):
                found.append(path)
    return sorted(found)


def _entries(root: Path) -> tuple[list[Path], list[Path]]:
    """The (files, folders) directly in ``root`` that may be submissions."""
    kept = [p for p in root.iterdir() if not _skip(p.relative_to(root))]
    return [p for p in kept if _file(p)], [p for p in kept if _folder(p)]


def check_class(path: Path) -> None:
    """Refuse, in one line naming the fix, a class that is missing, neither a folder nor a zip, or holds no file;
    cheap, so ``grade`` calls it before nbgrader loads."""
    if not path.exists():
        raise GradingError(f"{path} does not exist; pass the class's folder or zip")
    if path.is_dir():
        if not any(_file(f) and not _skip(f.relative_to(path)) for f in path.rglob("*")):
            raise GradingError(f"{path} holds no submitted file; pass the folder the class's submissions are in")
        return
    if not zipfile.is_zipfile(path):
        raise GradingError(f"{path} is neither a folder nor a zip file; pass the class's folder or zip")
    with zipfile.ZipFile(path) as z:
        if all(i.is_dir() or _skip(Path(i.filename)) for i in z.infolist()):
            raise GradingError(f"{path} is a zip with no submitted file in it; download the class's submissions again")


@contextmanager
def unpacked(path: Path) -> Iterator[Path]:
    """The folder to collect from: ``path`` itself, or a zip unpacked for the duration (after :func:`check_class`)."""
    if path.is_dir():
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="grading-unzip-") as tmp, zipfile.ZipFile(path) as z:
        z.extractall(tmp)  # zipfile drops absolute paths and ``..`` parts: nothing lands outside ``tmp``
        yield Path(tmp)


def _submitted_root(root: Path, assignment: str) -> Path | None:
    """The folder whose children are ``<student>/<assignment>/``, if the layout is nbgrader's."""
    if _folder(root / "submitted"):
        return root / "submitted"
    if any(_folder(d / assignment) for d in root.iterdir() if _folder(d)):
        return root
    files, folders = _entries(root)
    if len(folders) == 1 and not files:  # a zip with one top folder
        return _submitted_root(folders[0], assignment)
    return None


def _flat_root(root: Path) -> Path:
    """The folder holding flat ``<student>.*`` files (descending through lone top folders, not a student's own)."""
    files, folders = _entries(root)
    if not files and len(folders) == 1 and not lms_names.is_student_folder(folders[0].name):
        return _flat_root(folders[0])
    return root


def _not_a_notebook(files: list[Path]) -> str:
    return reasons.no_notebook_file(sorted({f.suffix or "suffixless" for f in files}), len(files))


def _student_folder(sub: Submission, folder: Path, assignment: str, notebooks: list[str]) -> None:
    """Fill ``sub`` from ``<student>/`` in nbgrader's layout."""
    adir = folder / assignment
    if not _folder(adir):
        sub.status, sub.problems = "missing", [reasons.no_assignment_folder(assignment, folder.name)]
        return
    timestamp = adir / "timestamp.txt"
    sub.timestamp = timestamp if _file(timestamp) else None
    found = sorted(f for f in adir.rglob("*") if _file(f) and not _skip(f.relative_to(adir)))
    ipynbs = []
    for f in _latest([f for f in found if f.suffix == ".ipynb"]):
        name, parts = resubmission(f.stem)[0], f.relative_to(adir).parts
        if len(parts) == 2 and parts[0] in TRANSLATIONS and name in notebooks:  # <lang>/<name>.ipynb
            sub.translations.setdefault(name, {})[parts[0]] = f
        else:
            ipynbs.append(f)
    sub.files.update({resubmission(f.stem)[0]: f for f in ipynbs if resubmission(f.stem)[0] in notebooks})
    missing = [n for n in notebooks if n not in sub.files and n not in sub.translations]
    extra = [f for f in ipynbs if resubmission(f.stem)[0] not in notebooks]
    if len(missing) == 1 and len(extra) == 1:
        sub.files[missing[0]] = extra[0]
        sub.notes.append(reasons.renamed_notebook(extra[0].name, missing[0]))
    elif not sub.files and not sub.translations:
        sub.status = "invalid" if found else "missing"
        sub.problems.append(_not_a_notebook(found) if found else reasons.no_notebook_for(assignment))


@dataclass
class _Claim:
    """One folder (nbgrader's layout) or one file stem (flat) found, and the student id its name gives."""

    name: str
    """The folder name or file stem as given."""
    label: str
    """What the instructor sees: the folder or file(s), relative to the class folder."""
    fill: Callable[[Submission], None]


def _folder_claims(submitted: Path, assignment: str, notebooks: list[str]) -> list[_Claim]:
    return [
        _Claim(d.name, f"{d.name}/", partial(_student_folder, folder=d, assignment=assignment, notebooks=notebooks))
        for d in sorted(submitted.iterdir())
        if _folder(d) and not _skip(d.relative_to(submitted))
    ]


def _fill_flat(sub: Submission, files: list[Path], notebooks: list[str]) -> None:
    """One student's flat files (one stem): the notebook is graded, the others noted; no notebook is invalid."""
    ipynbs = sorted((f for f in files if f.suffix == ".ipynb"), key=lambda f: -resubmission(f.stem)[1])
    if not ipynbs:
        sub.status = "invalid"
        sub.problems.append(_not_a_notebook(files))
        return
    sub.files[notebooks[0]] = ipynbs[0]  # the latest copy: a browser's `ann (2).ipynb` after `ann.ipynb`
    sub.notes += [reasons.ignored_file(f.name) for f in files if f != ipynbs[0]]
    if len(notebooks) > 1:
        sub.notes.append(reasons.flat_file_graded_as(notebooks[0]))


def _flat_claims(flat: Path, files: list[Path], notebooks: list[str]) -> list[_Claim]:
    """A claim per (folder, stem) of ``files``: ``ann.ipynb``, ``ann.txt`` and ``ann (1).ipynb`` are one student's."""
    stems: dict[tuple[Path, str], list[Path]] = {}
    for f in sorted(files):
        stems.setdefault((f.parent, resubmission(f.stem)[0]), []).append(f)
    return [
        _Claim(
            stem, ", ".join(str(f.relative_to(flat)) for f in fs), partial(_fill_flat, files=fs, notebooks=notebooks)
        )
        for (_, stem), fs in sorted(stems.items())
    ]


def _refused(student: str, problem: str) -> Submission:
    return Submission(student, status="invalid", problems=[problem])


def _resolve(claims: list[_Claim]) -> list[Submission]:
    """One submission per student id; a bad id or two claims on one id (case aside) are refused, naming the files."""
    subs: list[Submission] = []
    by_key: dict[str, list[tuple[str, _Claim]]] = {}
    for claim in claims:
        try:
            sid = student_id(claim.name)
        except StudentIdError as e:
            subs.append(_refused(claim.label, reasons.not_graded(str(e))))
            continue
        by_key.setdefault(sid.casefold(), []).append((sid, claim))
    for group in by_key.values():
        if len(group) == 1:
            sid, claim = group[0]
            subs.append(Submission(sid))
            claim.fill(subs[-1])
            continue
        labels = " and ".join(repr(c.label) for _, c in group)
        for sid in sorted({sid for sid, _ in group}):
            subs.append(_refused(sid, reasons.same_student_id(labels, sid)))
    return subs


def _fill_lms(sub: Submission, lms: str, files: list[lms_names.LmsFile], notebooks: list[str]) -> None:
    sub.lms, sub.lms_id, sub.lms_name = lms, files[0].lms_id, files[0].name
    _fill_flat(sub, [f.path for f in files], notebooks)


def _lms_claims(root: Path, notebooks: list[str], names: lms_names.Names) -> tuple[list[_Claim], list[Submission]]:
    """A claim per LMS id the download's names give (its course id from the roster), and the files refused."""
    flat = _flat_root(root)
    files = [p for p in flat.rglob("*") if _file(p) and not _skip(p.relative_to(flat))]
    lms, roster = names.lms, names.roster
    found, bad = lms_names.student_files(lms, flat, files)
    refused = [_refused(e.label, reasons.not_graded(str(e))) for e in bad]
    claims = []
    for lms_id, group in sorted(found.items()):
        sid = roster.ids.get(lms_id) if roster else lms_id
        label = ", ".join(str(f.path.relative_to(flat)) for f in group)
        if sid is None:
            refused.append(_refused(label, lms_names.unmapped(lms, group)))
            continue
        claims.append(_Claim(sid, label, partial(_fill_lms, lms=lms, files=group, notebooks=notebooks)))
    return claims, refused


def collect(
    root: Path,
    assignment: str,
    notebooks: list[str],
    names: lms_names.Names | None = None,
) -> list[Submission]:
    """Every student found under ``root`` (already unzipped), sorted by id; ``names``: an LMS's download (:mod:`.lms`).

    A notebook beside nbgrader's student folders is a flat submission, so a folder and a file of one student clash.
    """
    links = [_refused(str(p.relative_to(root)), reasons.a_link(p.name)) for p in _links(root)]
    if names:
        claims, refused = _lms_claims(root, notebooks, names)
        return sorted(_resolve(claims) + refused + links, key=lambda s: s.student)
    submitted = _submitted_root(root, assignment)
    if submitted:
        beside = [f for f in _entries(submitted)[0] if f.suffix == ".ipynb"]
        claims = _folder_claims(submitted, assignment, notebooks) + _flat_claims(submitted, beside, notebooks)
    else:
        flat = _flat_root(root)
        files = [p for p in flat.rglob("*") if _file(p) and not _skip(p.relative_to(flat))]
        claims = _flat_claims(flat, files, notebooks)
    return sorted(_resolve(claims) + links, key=lambda s: s.student)

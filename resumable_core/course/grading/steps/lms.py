"""A learning-management system's download names (:data:`PARSERS`), a roster from its ids to the course's, and
its grade import files, where a student not graded is left blank, never 0."""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import reasons
from ..csvfile import write_csv
from ..errors import GradingError, StudentIdError, check_id
from ..model import Submission

CANVAS = re.compile(r"^(?P<name>[a-z0-9]+?)_(?:late_)?(?P<id>\d+)_(?P<submission>\d+)_(?P<file>.+)$")
MOODLE = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_assign(?:submission|feedback)_[a-z]+_(?P<file>.*)$")
GRADESCOPE_FOLDER = re.compile(r"^submission_(?P<id>\d+)$")
GRADESCOPE_METADATA = "submission_metadata.yml"
ROSTER_COLUMNS = ("lms_id", "student_id")


@dataclass(frozen=True)
class LmsFile:
    """One downloaded file and what its name says: the LMS's id of the student, and their name as the LMS wrote it."""

    path: Path
    lms_id: str
    name: str


class LmsNameError(GradingError):
    """A file whose name is not the LMS's form: it says which file and the form expected."""

    def __init__(self, label: str, lms: str, form: str) -> None:
        super().__init__(f"{label}: not a {lms} download name ({form})")
        self.label, self.lms, self.form = label, lms, form


def _canvas(root: Path, path: Path) -> LmsFile:
    m = CANVAS.match(path.name)
    if not m:
        raise LmsNameError(str(path.relative_to(root)), "Canvas", "name_userid_submissionid_file.ipynb")
    return LmsFile(path, m["id"], m["name"])


def _moodle(root: Path, path: Path) -> LmsFile:
    rel = path.relative_to(root)
    m = MOODLE.match(rel.parts[0] if len(rel.parts) > 1 else path.name)
    if not m:
        raise LmsNameError(str(rel), "Moodle", "'Full Name_123456_assignsubmission_file_/' folders")
    return LmsFile(path, m["id"], m["name"])


def _gradescope(root: Path, path: Path) -> LmsFile:
    rel = path.relative_to(root)
    m = GRADESCOPE_FOLDER.match(rel.parts[0]) if len(rel.parts) > 1 else None
    if not m:
        raise LmsNameError(str(rel), "Gradescope", "submission_<id>/ folders beside submission_metadata.yml")
    sid, name = _gradescope_submitter(root, rel.parts[0])
    return LmsFile(path, sid, name)


def _gradescope_submitter(root: Path, folder: str) -> tuple[str, str]:
    """The (SID, name) of the one submitter ``submission_metadata.yml`` gives for ``folder``."""
    import yaml  # PyYAML comes with Jupyter (jupyter_events); only Gradescope needs it

    try:
        meta = yaml.safe_load((root / GRADESCOPE_METADATA).read_text(encoding="utf-8")) or {}
        submitters = meta[folder][":submitters"]
        (one,) = submitters
        return str(one[":sid"]), str(one.get(":name", ""))
    except FileNotFoundError:
        raise GradingError(
            f"no {GRADESCOPE_METADATA} beside the submission folders; unzip Gradescope's whole export"
        ) from None
    except (KeyError, TypeError, ValueError, yaml.YAMLError) as e:
        raise LmsNameError(
            folder, "Gradescope", f"{GRADESCOPE_METADATA} names no single submitter with a :sid ({e})"
        ) from None


def is_student_folder(name: str) -> bool:
    """Whether a folder of that name is one student's in a Moodle or Gradescope download (never a wrapper to descend)."""
    return bool(MOODLE.match(name) or GRADESCOPE_FOLDER.match(name))


PARSERS: dict[str, Callable[[Path, Path], LmsFile]] = {"canvas": _canvas, "moodle": _moodle, "gradescope": _gradescope}
"""Each LMS's download names, by the ``--lms`` choice."""


def student_files(lms: str, root: Path, files: Iterable[Path]) -> tuple[dict[str, list[LmsFile]], list[LmsNameError]]:
    """The files under ``root`` grouped by the LMS id their names give, and the ones whose names give none."""
    parse = PARSERS[lms]
    found: dict[str, list[LmsFile]] = {}
    bad: list[LmsNameError] = []
    for path in sorted(files):
        if path.name == GRADESCOPE_METADATA and path.parent == root:
            continue
        try:
            f = parse(root, path)
        except LmsNameError as e:
            bad.append(e)
            continue
        found.setdefault(f.lms_id, []).append(f)
    return found, bad


@dataclass(frozen=True)
class Roster:
    """The course's student id of each LMS id, read from a CSV whose header has ``lms_id`` and ``student_id``."""

    ids: dict[str, str]

    @classmethod
    def read(cls, path: Path) -> Roster:
        """The roster in ``path``; a one-line error naming the row for a missing column, a bad id or a duplicate."""
        try:
            with open(path, newline="", encoding="utf-8-sig") as f:
                rows = list(csv.DictReader(f))
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise GradingError(f"--roster {path}: cannot be read as CSV ({e})") from None
        if not rows or not set(ROSTER_COLUMNS) <= set(rows[0]):
            raise GradingError(f"--roster {path}: its header needs the columns {', '.join(ROSTER_COLUMNS)}")
        ids: dict[str, str] = {}
        seen: dict[str, str] = {}
        for line, row in enumerate(rows, start=2):
            lms_id, sid = ((row.get(c) or "").strip() for c in ROSTER_COLUMNS)
            try:
                check_id(sid)
            except StudentIdError as e:
                raise GradingError(f"--roster {path}, line {line}: student_id {sid!r}: {e.reason}") from None
            if not lms_id or lms_id in ids:
                raise GradingError(f"--roster {path}, line {line}: lms_id {lms_id!r} is empty or given twice")
            if sid.casefold() in seen:
                raise GradingError(
                    f"--roster {path}, line {line}: student_id {sid!r} is also lms_id {seen[sid.casefold()]!r}'s"
                )
            ids[lms_id], seen[sid.casefold()] = sid, lms_id
        return cls(ids)


@dataclass(frozen=True)
class Names:
    """How a class's file names give student ids: whose LMS download they are (:data:`PARSERS`), and its roster."""

    lms: str
    roster: Roster | None = None

    @classmethod
    def of(cls, lms: str | None, roster: str | Path | None) -> Names | None:
        """The ``--lms``/``--roster`` choice (None: the names are the ids); a roster without an LMS is refused."""
        if roster and not lms:
            raise GradingError(
                "--roster maps an LMS's ids: say whose download it is with --lms canvas|moodle|gradescope"
            )
        if not lms:
            return None
        if lms not in PARSERS:
            raise GradingError(f"--lms {lms!r}: this kit reads {', '.join(PARSERS)}")
        return cls(lms, Roster.read(Path(roster)) if roster else None)


def unmapped(lms: str, files: list[LmsFile]) -> str:
    """Why a student's files are refused: their LMS id is not in the roster (the names say whose they are)."""
    names = ", ".join(sorted(str(f.path.name) for f in files))
    return reasons.not_graded(
        f"{lms} id {files[0].lms_id} ({files[0].name}; {names}) is not in the roster; add it to --roster"
    )


# --- the grades, back into the LMS -----------------------------------------------------------------

CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_HEADER = ("Identifier", "Full name", "Grade", "Maximum Grade", "Feedback comments")


IMPORTS = ("canvas", "moodle")
"""The LMSs whose gradebook takes a file of grades (Gradescope takes none: ``grades.csv``, with SIDs as ids)."""


def outgoing(sub: Submission, provisional: bool) -> tuple[float | None, str]:
    """The score an import file gives ``sub`` (None: left blank) and the learner's sentence on it (a catalog id).

    Blank while some points wait for a human, unless ``provisional``: then the score goes out, saying it may change.
    """
    if sub.status == "missing":
        return None, reasons.LMS_NO_SUBMISSION
    if sub.status in ("failed", "invalid"):
        return None, reasons.LMS_NOT_GRADED
    if sub.provisional:
        return (sub.score, reasons.LMS_PROVISIONAL) if provisional else (None, reasons.LMS_WAITING)
    return sub.score, reasons.LMS_GRADED


@dataclass(frozen=True)
class Imports:
    """The import files written, and how many of their students are left blank: waiting for a human, not graded."""

    paths: list[Path]
    waiting: int
    not_graded: int


def write_imports(
    folder: Path,
    assignment: str,
    subs: list[Submission],
    provisional: bool = False,
    languages: Mapping[str, str] | None = None,
) -> Imports:
    """A gradebook import file per LMS (:data:`IMPORTS`) that ``subs``' files came from; ``languages``: {student:
    their notebook's language}, for Moodle's feedback column."""
    paths = []
    for lms in IMPORTS:
        students = [s for s in subs if s.lms == lms and s.lms_id]
        if students:
            paths.append(_write_import(folder / f"{lms}-import.csv", lms, assignment, students, provisional, languages))
    why = Counter(outgoing(s, provisional)[1] for s in subs if s.lms in IMPORTS and s.lms_id)
    not_graded = why[reasons.LMS_NOT_GRADED] + why[reasons.LMS_NO_SUBMISSION]
    return Imports(paths, why[reasons.LMS_WAITING], not_graded)


def _write_import(
    path: Path,
    lms: str,
    assignment: str,
    subs: list[Submission],
    provisional: bool,
    languages: Mapping[str, str] | None,
) -> Path:
    """One LMS's import file of ``subs``: Canvas's gradebook export columns, or Moodle's offline grading worksheet."""
    from ..i18n import GRADING

    graded = sorted(subs, key=lambda s: s.student)
    sent = {s.student: outgoing(s, provisional) for s in graded}
    score = {student: "" if points is None else f"{points:g}" for student, (points, _) in sent.items()}
    words = {s: GRADING.gettext(why, (languages or {}).get(s, "en")) for s, (_, why) in sent.items()}
    if lms == "canvas":
        top = max((s.max_score for s in graded), default=0)
        rows: list[list[object]] = [["Points Possible", "", "", "", "", f"{top:g}"]]
        rows += [[s.lms_name, s.lms_id, s.student, "", "", score[s.student]] for s in graded]
        return write_csv(path, [*CANVAS_HEADER, assignment], rows)
    rows = [
        [f"Participant {s.lms_id}", s.lms_name, score[s.student], f"{s.max_score:g}", words[s.student]] for s in graded
    ]
    return write_csv(path, MOODLE_HEADER, rows)

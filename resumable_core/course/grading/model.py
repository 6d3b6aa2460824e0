"""The grading run's data model: what a submission is, what a worker reports, what a graded cell holds (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Status = Literal["graded", "failed", "invalid", "empty", "missing"]
"""graded: autograded (the score says how well); failed: nbgrader could not finish the notebook
(score 0); invalid: not a notebook (score 0, not run); empty: a notebook with no code of the learner
(graded like any, it scores what the restored tests give); missing: no notebook for the assignment."""

Cells = dict[str, dict[str, str]]
"""{notebook name: {key: text}}: the zeroed cells' reasons, or why a re-check was inconclusive."""


@dataclass
class Submission:
    """One student's submission as found, and what grading it showed."""

    student: str
    files: dict[str, Path] = field(default_factory=dict)
    """Assignment notebook name (without .ipynb) -> the learner's file (after :mod:`.prepare`: the one graded)."""
    translations: dict[str, dict[str, Path]] = field(default_factory=dict)
    """Assignment notebook name -> {language: the learner's ``<lang>/<name>.ipynb``} handed in beside it
    (nbgrader's exchange hands out both): :mod:`.prepare` grades the one the learner edited."""
    timestamp: Path | None = None
    status: Status = "graded"
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    score: float = 0.0
    max_score: float = 0.0
    lms: str | None = None
    """Whose download the files came from (a key of :data:`.lms.PARSERS`), when they came from one."""
    lms_id: str | None = None
    """The learning-management system's id of the student, when the files came from its download (:mod:`.lms`)."""
    lms_name: str = ""
    """The student's name as the LMS wrote it in the file names (for its import file)."""
    provisional: bool = False
    """Some of its points still wait for manual grading: the score is not final."""

    @property
    def reason(self) -> str:
        """Everything a reader of grades.csv should know about this submission, on one line."""
        return "; ".join(self.problems + self.notes)

    @property
    def to_grade(self) -> bool:
        """Whether nbgrader runs this submission (an empty notebook is graded too)."""
        return self.status in ("graded", "empty")


@dataclass
class StudentReport:
    """What a worker reports for one student (``reports/<student>.json`` in its course copy)."""

    student: str
    worker: str
    """The worker's course folder (its gradebook, autograded/ and feedback/)."""
    success: bool
    log: str = ""
    error: str = ""
    isolated: Cells = field(default_factory=dict)
    """{notebook: {grade_id: reason}} of the cells zeroed by the isolated re-check (:func:`.workers.recheck_outcome` words it)."""
    isolated_kept: Cells = field(default_factory=dict)
    """{notebook: {"why": ..., "cells": "grade_id, ..."}} where the re-check was inconclusive (those cells score 0)."""
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds of this student's ``autograde`` (nbgrader with the sandboxed kernel) and ``recheck``."""


@dataclass(frozen=True)
class CellGrade:
    """One graded cell's row of a gradebook, as plain values."""

    score: float | None
    """None while the cell waits for manual grading."""
    max_score: float
    comment: str = ""
    """The instructor's manual comment, if any."""
    auto_score: float | None = None
    manual_score: float | None = None
    """A human's (or the re-check's) score, overriding ``auto_score``."""


NotebookGrades = dict[str, CellGrade]
"""{grade_id: its grade} of one submitted notebook."""

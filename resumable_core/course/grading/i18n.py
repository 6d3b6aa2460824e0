"""The grading pipeline's words for learners: the reasons of grades.csv and the feedback pages."""

from __future__ import annotations

from pathlib import Path

from resumable_core.lab.i18n import Catalog, register

GRADING = register(
    Catalog(
        "grading",
        Path(__file__).parent / "locale",
        ("course/grading/reasons.py", "course/grading/steps/feedback.py", "course/grading/cli.py"),
    )
)

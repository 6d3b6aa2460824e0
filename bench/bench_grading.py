"""Bench: 60 submissions of ``reconcile`` graded by plain sequential ``nbgrader autograde`` and by
``python -m resumable_core grade --jobs 2``; the grades must match; wall-clock times side by side.

Run: ``.venv/bin/python bench/bench_grading.py`` (several minutes).
"""

from __future__ import annotations

import csv
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from resumable_core.course.grading.pipeline import grade
from resumable_core.course.grading.workspace import DEFAULT_TIMEOUT, write_course
from resumable_core.course.nbgrader_cli import nbgrader

REPO = Path(__file__).resolve().parent.parent


def _load_samples() -> ModuleType:
    """The test suite's sample class, loaded from its file (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("grading_samples", REPO / "tests" / "grading_samples.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {REPO / 'tests' / 'grading_samples.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()

HONEST = ("correct", "rerun_everything", "delete_move", "is_error_all", "forgot_pending")
"""Not stderr_writer: plain nbgrader zeroes a cell that wrote to stderr, the kit does not (by design)."""
N = 60


def main() -> int:
    source = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
    keep = dict(samples.SAMPLES)
    samples.SAMPLES.clear()
    samples.SAMPLES.update({k: keep[k] for k in HONEST})
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp_name:
        tmp = Path(tmp_name)
        samples.write_class(source, tmp / "class", layout="submitted", copies=N // len(HONEST))
        for extra in ("not_a_notebook", "empty"):  # the bench grades 60 notebooks, all honest
            shutil.rmtree(tmp / "class" / "submitted" / extra)
        students = sorted(p.name for p in (tmp / "class" / "submitted").iterdir())
        if len(students) != N:
            raise RuntimeError(f"the sample class has {len(students)} students, not {N}")

        # 1. plain nbgrader: one course, `nbgrader autograde reconcile` over every student, then export
        seq = tmp / "sequential"
        write_course(seq, DEFAULT_TIMEOUT)
        shutil.copytree(source.parent, seq / "source" / "reconcile")
        nbgrader(["generate_assignment", "reconcile", "--force"], seq)
        shutil.copytree(tmp / "class" / "submitted", seq / "submitted")
        t0 = time.monotonic()
        nbgrader(["autograde", "reconcile", "--force"], seq, timeout=3600)
        t_seq = time.monotonic() - t0
        nbgrader(["export", "--to", str(seq / "export.csv")], seq)
        with open(seq / "export.csv", newline="") as f:
            seq_scores = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}

        # 2. the kit: --jobs 2 (autograde + feedback + export + report)
        t0 = time.monotonic()
        run = grade(tmp / "class", "reconcile", jobs=2, out=tmp / "kit", echo=lambda *a, **k: None)
        t_kit = time.monotonic() - t0
        kit_scores = {s.student: s.score for s in run.submissions}

    if kit_scores != seq_scores:
        raise RuntimeError("the kit's grades differ from plain nbgrader's")
    print(f"{N} submissions of reconcile, {len(set(seq_scores.values()))} distinct scores, grades identical")
    print(f"{'':32}{'wall-clock':>12}{'per submission':>16}")
    print(f"{'nbgrader autograde (sequential)':32}{t_seq:>10.1f} s{t_seq / N:>14.2f} s")
    print(f"{'kit grade --jobs 2 (+feedback)':32}{t_kit:>10.1f} s{t_kit / N:>14.2f} s")
    print(f"speed-up: {t_seq / t_kit:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

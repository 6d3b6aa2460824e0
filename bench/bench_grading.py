"""Bench: 60 submissions of ``reconcile`` graded by plain sequential ``nbgrader autograde`` and by
``python -m resumable_core grade --jobs 2``; the grades must match; wall-clock times side by side.

Run: ``.venv/bin/python bench/bench_grading.py`` (several minutes).
"""

from __future__ import annotations

import csv
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import grading_samples as samples  # noqa: E402

from resumable_core.course.grading import pipeline as grading  # noqa: E402

HONEST = ("correct", "rerun_everything", "delete_move", "is_error_all", "forgot_pending", "stderr_writer")
N = 60


def main() -> int:
    source = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
    keep = dict(samples.SAMPLES)
    samples.SAMPLES.clear()
    samples.SAMPLES.update({k: keep[k] for k in HONEST})
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        samples.write_class(source, tmp / "class", layout="submitted", copies=N // len(HONEST))
        for extra in ("not_a_notebook", "empty"):  # the bench grades 60 notebooks, all honest
            shutil.rmtree(tmp / "class" / "submitted" / extra)
        students = sorted(p.name for p in (tmp / "class" / "submitted").iterdir())
        assert len(students) == N, len(students)

        # 1. plain nbgrader: one course, `nbgrader autograde reconcile` over every student, then export
        seq = tmp / "sequential"
        grading.write_course(seq, grading.DEFAULT_TIMEOUT)
        shutil.copytree(source.parent, seq / "source" / "reconcile")
        grading.nbgrader(seq, "generate_assignment", "reconcile", "--force")
        shutil.copytree(tmp / "class" / "submitted", seq / "submitted")
        t0 = time.monotonic()
        grading.nbgrader(seq, "autograde", "reconcile", "--force")
        t_seq = time.monotonic() - t0
        grading.nbgrader(seq, "export", "--to", str(seq / "export.csv"))
        with open(seq / "export.csv", newline="") as f:
            seq_scores = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}

        # 2. the kit: --jobs 2 (autograde + feedback + export + report)
        t0 = time.monotonic()
        run = grading.grade(tmp / "class", "reconcile", jobs=2, out=tmp / "kit", echo=lambda *a, **k: None)
        t_kit = time.monotonic() - t0
        kit_scores = {s.student: s.score for s in run.submissions}

    assert kit_scores == seq_scores, "the kit's grades differ from plain nbgrader's"
    print(f"{N} submissions of reconcile, {len(set(seq_scores.values()))} distinct scores, grades identical")
    print(f"{'':32}{'wall-clock':>12}{'per submission':>16}")
    print(f"{'nbgrader autograde (sequential)':32}{t_seq:>10.1f} s{t_seq / N:>14.2f} s")
    print(f"{'kit grade --jobs 2 (+feedback)':32}{t_kit:>10.1f} s{t_kit / N:>14.2f} s")
    print(f"speed-up: {t_seq / t_kit:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Grade a whole class with real nbgrader: ``python -m resumable_core grade PATH --assignment A``.

The pipeline, in a fresh working course folder (``./grading-<assignment>/`` or ``--out``; the
course's own gradebook is never touched):

1. copy the assignment's source notebooks into ``source/`` and run ``nbgrader generate_assignment``
   (this fills the working gradebook with the test cells, hidden tests included);
2. collect the submissions (a folder or a zip; nbgrader's ``submitted/<student>/<assignment>/``
   layout or flat ``<student>.ipynb`` files), refuse what is not a notebook, map a renamed
   notebook to the assignment's when it is the student's only one, put back deleted cells;
3. split the students across ``--jobs`` worker course copies (each a copy of the gradebook) and
   run nbgrader's autograde there, one student at a time per worker; then re-check every test cell
   that scored in a fresh process outside the learner's kernel (:mod:`resumable_core.isolated`: a
   learner cell can monkeypatch the checks its kernel runs) and zero the ones that fail there
   (``Grade.manual_score = 0``) when that re-run is conclusive (else the kernel's score is kept
   and the submission flagged for review), then generate_feedback;
4. merge every worker's grades into the working gradebook, run ``nbgrader export``, and write
   ``grades.csv``, ``feedback/<student>.html`` and ``scores.png``.

The grades do not depend on ``--jobs``: every student is graded by the same nbgrader code against a
copy of the same gradebook, alone in its own kernel.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..release import nbgrader_env

MARKER = ".resumable-grading"
"""A file that marks a folder as made by this command (and safe to wipe on the next run)."""
DEFAULT_TIMEOUT = 60
CSV_FIELDS = ("student_id", "score", "max_score", "status", "reason")
STATUSES = ("graded", "failed", "invalid", "empty", "missing")
"""graded: autograded (the score says how well); failed: nbgrader could not finish the notebook
(score 0); invalid: not a notebook (score 0, not run); empty: a notebook with no code of the learner
(graded like any, it scores what the restored tests give); missing: no notebook for the assignment."""

REPO_ROOT = Path(__file__).resolve().parents[3]


# --- the working course ---------------------------------------------------------------------

CONFIG = """# Written by `python -m resumable_core grade`; a throwaway course for one grading run.
c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.db_url = {db_url!r}
c.CourseDirectory.course_id = "resumable-agents"
c.Execute.timeout = {timeout}
c.Execute.interrupt_on_timeout = True
c.ExecutePreprocessor.timeout = {timeout}
c.OverwriteCells.add_missing_cells = True
c.Autograde.create_student = True
"""


def subprocess_env() -> dict[str, str]:
    """The environment nbgrader runs in: the venv's bin first (it shells out to alembic), offline."""
    env = nbgrader_env()
    env.pop("RESUMABLE_LIVE", None)  # grading is always against the scripted Claude
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def write_course(root: Path, timeout: int) -> None:
    """Make ``root`` an nbgrader course with its own gradebook."""
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by python -m resumable_core grade\n")
    (root / "nbgrader_config.py").write_text(
        CONFIG.format(root=str(root), db_url=f"sqlite:///{root / 'gradebook.db'}", timeout=int(timeout))
    )


def nbgrader(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the nbgrader CLI in course ``root``."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    proc = subprocess.run(cmd, cwd=root, env=subprocess_env(), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise GradingError(f"`nbgrader {' '.join(args)}` failed:\n{proc.stderr[-3000:]}")
    return proc


class GradingError(Exception):
    """The grading run itself cannot go on (not one student's problem)."""


def find_source(assignment: str, source: str | None, course: str | None) -> Path:
    """The folder with the assignment's source (instructor) notebooks."""
    if source:
        path = Path(source)
    else:
        root = Path(course) if course else REPO_ROOT
        candidates = [root / d / assignment for d in ("solutions", "source")]
        path = next((c for c in candidates if c.is_dir()), candidates[0])
    if not path.is_dir() or not list(path.glob("*.ipynb")):
        raise GradingError(f"no source notebooks for assignment {assignment!r} in {path}")
    return path


def prepare_out(out: Path, course_roots: list[Path]) -> None:
    """A fresh, empty working folder; refuses a folder this command did not make."""
    out = out.resolve()
    for root in course_roots:
        if out == root.resolve():
            raise GradingError(f"--out {out} is the course folder itself: grading never writes into its gradebook")
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise GradingError(f"{out} exists and was not made by this command; pick another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


# --- collecting submissions -----------------------------------------------------------------


@dataclass
class Submission:
    """One student's submission as found, and what grading it showed."""

    student: str
    files: dict[str, Path] = field(default_factory=dict)
    """Assignment notebook name (without .ipynb) -> the learner's file."""
    timestamp: Path | None = None
    status: str = "graded"
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    score: float = 0.0
    max_score: float = 0.0

    @property
    def reason(self) -> str:
        return "; ".join(self.problems + self.notes)


_SAFE_ID = re.compile(r"[^A-Za-z0-9_.@-]+")


def student_id(name: str) -> str:
    """A student id nbgrader and file systems accept."""
    sid = _SAFE_ID.sub("_", name).strip("._") or "student"
    return sid


def _skip(p: Path) -> bool:
    return any(part.startswith(".") or part == "__MACOSX" for part in p.parts) or p.name in ("timestamp.txt",)


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


def _find_submitted_root(root: Path, assignment: str) -> Path | None:
    """The folder whose children are ``<student>/<assignment>/``, if the layout is nbgrader's."""
    if (root / "submitted").is_dir():
        return root / "submitted"
    if any((d / assignment).is_dir() for d in root.iterdir() if d.is_dir()):
        return root
    subdirs = [d for d in root.iterdir() if d.is_dir() and not _skip(d.relative_to(root))]
    files = [f for f in root.iterdir() if f.is_file() and not _skip(f.relative_to(root))]
    if len(subdirs) == 1 and not files:  # a zip with one top folder
        inner = _find_submitted_root(subdirs[0], assignment)
        return inner if inner is not None else None
    return None


def _flat_root(root: Path) -> Path:
    files = [f for f in root.iterdir() if f.is_file() and not _skip(f.relative_to(root))]
    subdirs = [d for d in root.iterdir() if d.is_dir() and not _skip(d.relative_to(root))]
    if not files and len(subdirs) == 1:
        return _flat_root(subdirs[0])
    return root


def _not_a_notebook(files: list[Path]) -> str:
    kinds = sorted({f.suffix or "suffixless" for f in files})
    return f"not a notebook: {' and '.join(kinds)} file{'s' if len(files) > 1 else ''}, no .ipynb"


def collect(root: Path, assignment: str, notebooks: list[str]) -> list[Submission]:
    """Every student found under ``root`` (already unzipped), sorted by id."""
    subs: dict[str, Submission] = {}
    submitted = _find_submitted_root(root, assignment)
    if submitted is not None:
        for sdir in sorted(d for d in submitted.iterdir() if d.is_dir() and not d.name.startswith(".")):
            sub = subs.setdefault(student_id(sdir.name), Submission(student_id(sdir.name)))
            adir = sdir / assignment
            if not adir.is_dir():
                sub.status, sub.problems = "missing", [f"no {assignment}/ folder in {sdir.name}/"]
                continue
            ts = adir / "timestamp.txt"
            sub.timestamp = ts if ts.is_file() else None
            found = sorted(f for f in adir.rglob("*") if f.is_file() and not _skip(f.relative_to(adir)))
            ipynbs = [f for f in found if f.suffix == ".ipynb"]
            for f in ipynbs:
                if f.stem in notebooks:
                    sub.files[f.stem] = f
            missing = [n for n in notebooks if n not in sub.files]
            extra = [f for f in ipynbs if f.stem not in notebooks]
            if len(missing) == 1 and len(extra) == 1:
                sub.files[missing[0]] = extra[0]
                sub.notes.append(f"renamed notebook {extra[0].name!r} graded as {missing[0]}.ipynb")
            elif not sub.files:
                sub.status = "missing" if not found else "invalid"
                sub.problems.append(_not_a_notebook(found) if found else f"no notebook for {assignment}")
    else:
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
    return [subs[k] for k in sorted(subs)]


# --- checking and repairing a notebook before grading ----------------------------------------


def read_notebook(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The notebook, or why it is not one."""
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, "not a notebook: the file is not JSON"
    if not isinstance(data, dict) or "cells" not in data:
        return None, "not a notebook: JSON without a cells list"
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as e:  # nbformat raises several kinds
        return None, f"not a notebook: fails nbformat validation ({type(e).__name__})"
    return nb, None


def _nbgrader_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def restore_cells(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """Put back the instructor's cells (tests, locked cells, answer cells) the learner deleted.

    Each goes after the restored position of the instructor cell before it; nbgrader then
    overwrites every test cell with the gradebook's version anyway (edits are undone there).
    Returns the ids put back.
    """
    present = {_nbgrader_id(c) for c in nb.cells} - {None}
    restored = []
    position = -1  # index in nb after which the next instructor cell goes
    for rcell in release.cells:
        gid = _nbgrader_id(rcell)
        if gid is None:
            continue
        if gid in present:
            position = next(i for i, c in enumerate(nb.cells) if _nbgrader_id(c) == gid)
            continue
        cell = nbformat.from_dict(json.loads(json.dumps(rcell)))
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nb.cells.insert(position + 1, cell)
        position += 1
        restored.append(gid)
    return restored


def learner_code(nb: nbformat.NotebookNode) -> list[str]:
    """The code the learner could write (cells not locked by the instructor)."""
    out = []
    for c in nb.cells:
        info = c.get("metadata", {}).get("nbgrader", {})
        if c.cell_type == "code" and not info.get("locked") and not info.get("grade"):
            out.append(c.source)
    return out


_SUSPICIOUS_CALLS = {"setattr", "set_custom_exc", "_exit", "reload", "delattr"}


def suspicious(nb: nbformat.NotebookNode) -> list[str]:
    """What the learner's code does that a reviewer should look at (monkeypatching, exits).

    Flags only: the hidden tests decide the score.
    """
    found: list[str] = []
    modules: set[str] = {"sys", "builtins", "os", "resumable_core", "rc"}
    for src in learner_code(nb):
        try:
            tree = ast.parse("\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    modules.add((a.asname or a.name).split(".")[0])
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute):
                    dotted = ast.unparse(t)
                    root = dotted.split(".")[0]
                    if root in modules or dotted.startswith(("sys.", "builtins.")):
                        found.append(f"assigns {dotted}")
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in _SUSPICIOUS_CALLS:
                    found.append(f"calls {ast.unparse(node.func)}()")
    return sorted(set(found))


# --- workers ----------------------------------------------------------------------------------


def _copy_course(main: Path, worker: Path, timeout: int, students: list[str], assignment: str) -> None:
    write_course(worker, timeout)
    shutil.copytree(main / "source", worker / "source")
    shutil.copytree(main / "release", worker / "release")
    shutil.copy2(main / "gradebook.db", worker / "gradebook.db")
    for s in students:
        shutil.copytree(main / "submitted" / s, worker / "submitted" / s)


def _classify_failure(text: str, timeout: int) -> str:
    if "DeadKernelError" in text or "Kernel died" in text:
        return (
            "the kernel died while running the notebook (os._exit, a crash or out of memory); no cell could be graded"
        )
    if "UnresponsiveKernel" in text or "became unresponsive" in text:
        return f"the kernel stayed unresponsive after the {timeout} s timeout and could not be interrupted"
    if "CellTimeoutError" in text or "TimeoutError" in text:
        return f"a cell ran past the {timeout} s timeout and the notebook could not go on"
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
    return "nbgrader autograde failed: " + (
        errs[-1].strip() if errs else (lines[-1].strip() if lines else "unknown error")
    )


def worker_main(argv: list[str]) -> int:
    """``python -m resumable_core.grading worker ROOT ASSIGNMENT STUDENT...``: one JSON line per student."""
    root, assignment, students = Path(argv[0]), argv[1], argv[2:]
    os.chdir(root)
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    coursedir = CourseDirectory(config=config)
    api = NbGraderAPI(coursedir=coursedir, config=config)
    for s in students:
        t0 = time.monotonic()
        res = api.autograde(assignment, s, force=True, create=True)
        isolated, kept = recheck_isolated(root, assignment, s, timeout_of(config)) if res.get("success") else ({}, {})
        fb = api.generate_feedback(assignment, s, force=True) if res.get("success") else {"success": False}
        line = {
            "student": s,
            "success": bool(res.get("success")),
            "log": (res.get("log") or "")[-20000:],
            "error": (res.get("error") or "")[-5000:],
            "feedback": bool(fb.get("success")),
            "isolated": isolated,
            "isolated_kept": kept,
            "seconds": round(time.monotonic() - t0, 2),
        }
        print(json.dumps(line), flush=True)
    return 0


def timeout_of(config) -> int:
    """The course's per-cell timeout (``Execute.timeout``)."""
    try:
        return int(config.Execute.timeout)
    except (AttributeError, TypeError, ValueError):
        return DEFAULT_TIMEOUT


def recheck_isolated(
    root: Path, assignment: str, student: str, timeout: int
) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Re-run, outside the learner's kernel, every test cell that scored; zero the ones that fail there.

    See :mod:`resumable_core.isolated`. A failing cell gets ``Grade.manual_score = 0`` (nbgrader's
    instructor override, so ``score`` becomes 0 while ``auto_score`` keeps what the kernel gave),
    but only when the re-run is conclusive: if the isolated process died or hung, or the learner's
    code raised while loading there but not in the kernel, nothing is zeroed (an honest notebook
    must never lose points to this check) and the cells are reported for review instead.
    Cells that failed in nbgrader are never re-checked and no score is raised.
    Returns ({notebook: {grade_id: reason}} of the zeroed cells,
    {notebook: {"why": why inconclusive, "cells": "grade_id, ..."}} of the kept ones).
    """
    from nbgrader.api import Gradebook

    from . import recheck as isolated

    db_url = f"sqlite:///{root / 'gradebook.db'}"
    out: dict[str, dict[str, str]] = {}
    kept: dict[str, dict[str, str]] = {}
    for nb_path in sorted((root / "autograded" / student / assignment).glob("*.ipynb")):
        name = nb_path.stem
        with Gradebook(db_url) as gb:
            try:
                grades = gb.find_submission_notebook(name, assignment, student).grades
            except Exception:
                continue
            passed = sorted(g.name for g in grades if not g.needs_manual_grade and (g.score or 0) > 0)
        if not passed:
            continue
        source = root / "source" / assignment / f"{name}.ipynb"
        report = isolated.run(
            nb_path,
            assignment,
            source=source if source.is_file() else None,
            only=passed,
            timeout=timeout,
            env=subprocess_env(),
        )
        failed = {gid: why for gid, why in report.items() if gid in passed and why}
        if not failed:
            continue
        if report.inconclusive:
            kept[name] = {"why": report.inconclusive, "cells": ", ".join(sorted(failed))}
            continue
        with Gradebook(db_url) as gb:
            for gid in failed:
                gb.find_grade(gid, name, assignment, student).manual_score = 0.0
            gb.db.commit()
        out[name] = failed
    return out, kept


ISOLATED_REASON = (
    "passed in the learner's kernel but failed in an isolated re-run: {why}; "
    "the checks pass only in the notebook's own kernel (the submission patches the graders?)"
)
KEPT_REASON = "could not re-check in isolation ({why}; cells {cells}); kept the notebook's score; flagged for review"


def run_workers(main: Path, assignment: str, students: list[str], jobs: int, timeout: int, progress) -> dict[str, dict]:
    """Grade ``students`` in ``jobs`` worker course copies; return each student's worker report."""
    jobs = max(1, min(jobs, len(students) or 1))
    shares = [students[i::jobs] for i in range(jobs)]
    results: dict[str, dict] = {}

    def run(i: int, share: list[str]) -> None:
        worker = main / "workers" / f"w{i}"
        _copy_course(main, worker, timeout, share, assignment)
        cmd = [
            sys.executable,
            "-m",
            "resumable_core.course.grading.pipeline",
            "worker",
            str(worker),
            assignment,
            *share,
        ]
        proc = subprocess.Popen(
            cmd, cwd=worker, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                rep = json.loads(line)
            except json.JSONDecodeError:
                continue
            rep["worker"] = worker
            results[rep["student"]] = rep
            progress(rep)
        proc.wait()
        for s in share:  # a worker that died takes its remaining students with it: say so
            if s not in results:
                results[s] = {
                    "student": s,
                    "success": False,
                    "worker": worker,
                    "feedback": False,
                    "log": "",
                    "error": f"grading worker exited with code {proc.returncode}",
                    "seconds": 0,
                }
                progress(results[s])

    if not students:
        return results
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(run, i, share) for i, share in enumerate(shares) if share]:
            f.result()
    return results


def merge_gradebook(target_db: str, source_db: str, assignment: str, students: list[str]) -> None:
    """Copy the students' submissions (grades, comments, flags) from a worker's gradebook."""
    from nbgrader.api import Gradebook

    found = []
    with Gradebook(source_db) as src:  # read everything into plain values first
        for s in students:
            try:
                sub = src.find_submission(assignment, s)
            except Exception:
                continue
            st = src.find_student(s)
            found.append(
                {
                    "student": s,
                    "names": dict(first_name=st.first_name, last_name=st.last_name, email=st.email),
                    "timestamp": sub.timestamp,
                    "notebooks": [
                        {
                            "name": nb.name,
                            "flagged": nb.flagged,
                            "grades": [
                                (g.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
                                for g in nb.grades
                            ],
                            "comments": [(c.name, c.auto_comment, c.manual_comment) for c in nb.comments],
                        }
                        for nb in sub.notebooks
                    ],
                }
            )
    with warnings.catch_warnings(), Gradebook(target_db) as dst:
        # nbgrader's add_submission trips SQLAlchemy autoflush warnings; the rows are right
        warnings.simplefilter("ignore")
        for rec in found:
            s = rec["student"]
            dst.update_or_create_student(s, **rec["names"])
            dst.update_or_create_submission(assignment, s, timestamp=rec["timestamp"])
            for nb in rec["notebooks"]:
                dnb = dst.find_submission_notebook(nb["name"], assignment, s)
                dnb.flagged = nb["flagged"]
                for name, auto, manual, extra, needs in nb["grades"]:
                    g = dst.find_grade(name, nb["name"], assignment, s)
                    g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade = auto, manual, extra, needs
                for name, auto, manual in nb["comments"]:
                    c = dst.find_comment(name, nb["name"], assignment, s)
                    c.auto_comment, c.manual_comment = auto, manual
            dst.db.commit()


# --- reasons from the graded notebook ------------------------------------------------------------


def _cell_loss(cell, timeout: int) -> str:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            ename = o.get("ename", "Error")
            if ename in ("CellTimeoutError", "KeyboardInterrupt"):
                return f"interrupted at the {timeout} s timeout"
            evalue = str(o.get("evalue", "")).strip().splitlines()
            return f"{ename}: {evalue[0][:120]}" if evalue else ename
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") == "stderr":
            return "wrote to stderr"
    return "partial credit"


def cell_reasons(
    autograded_nb: Path,
    db_url: str,
    assignment: str,
    student: str,
    nb_name: str,
    timeout: int,
    isolated: dict[str, str] | None = None,
) -> list[str]:
    """One phrase per test cell that lost points: ``test_x 0/3 (AssertionError: ...)``.

    ``isolated``: {grade_id: reason} of the cells zeroed by the isolated re-check.
    """
    from nbgrader.api import Gradebook

    try:
        nb = nbformat.read(str(autograded_nb), as_version=4)
    except Exception:
        return []
    out = []
    with Gradebook(db_url) as gb:
        for cell in nb.cells:
            info = cell.get("metadata", {}).get("nbgrader", {})
            if not info.get("grade"):
                continue
            try:
                g = gb.find_grade(info["grade_id"], nb_name, assignment, student)
            except Exception:
                continue
            if g.needs_manual_grade:
                out.append(f"{info['grade_id']} ?/{g.max_score:g} (needs manual grading)")
            elif isolated and info["grade_id"] in isolated:
                out.append(
                    f"{info['grade_id']} {g.score:g}/{g.max_score:g} ({ISOLATED_REASON.format(why=(isolated[info['grade_id']].splitlines() or [''])[0][:120])})"
                )
            elif g.score < g.max_score and cell.cell_type == "code":
                out.append(f"{info['grade_id']} {g.score:g}/{g.max_score:g} ({_cell_loss(cell, timeout)})")
    return out


# --- the report ------------------------------------------------------------------------------


def write_csv(path: Path, subs: list[Submission]) -> None:
    """``grades.csv``: one row per student, sorted by id."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for s in sorted(subs, key=lambda s: s.student):
            w.writerow([s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, s.reason])


def format_table(subs: list[Submission]) -> str:
    """The summary table printed at the end."""
    rows = [("student", "score", "max", "status", "reason")]
    rows += [(s.student, f"{s.score:g}", f"{s.max_score:g}", s.status, s.reason) for s in subs]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
        if j == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
    return "\n".join(lines)


def plot_scores(path: Path, subs: list[Submission], assignment: str) -> None:
    """A histogram of the scores (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    max_score = max((s.max_score for s in subs), default=0) or 1
    scores = [s.score for s in subs]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    bins = [x - 0.5 for x in range(int(max_score) + 2)]
    ax.hist(scores, bins=bins, color="#4C72B0", edgecolor="white")
    ax.set_xlabel(f"score (out of {max_score:g})")
    ax.set_ylabel("students")
    ax.set_title(f"{assignment}: {len(subs)} submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --- the command -------------------------------------------------------------------------------


@dataclass
class GradeRun:
    """What ``grade`` produced."""

    out: Path
    submissions: list[Submission]
    csv_path: Path
    plot_path: Path
    seconds: float


def grade(
    path: str | Path,
    assignment: str = "reconcile",
    *,
    jobs: int = 1,
    out: str | Path | None = None,
    source: str | Path | None = None,
    course: str | Path | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    echo=print,
) -> GradeRun:
    """Grade every submission under ``path`` (folder or zip); see the module docstring."""
    t0 = time.monotonic()
    path = Path(path)
    if not path.exists():
        raise GradingError(f"{path} does not exist")
    src = find_source(assignment, str(source) if source else None, str(course) if course else None)
    out = Path(out) if out else Path.cwd() / f"grading-{assignment}"
    prepare_out(out, [REPO_ROOT, Path(course) if course else REPO_ROOT, src.parent.parent])
    out = out.resolve()
    write_course(out, timeout)
    shutil.copytree(
        src, out / "source" / assignment, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    )
    echo(f"Grading {assignment!r} from {path} in {out} (timeout {timeout} s, {jobs} job(s))")
    nbgrader(out, "generate_assignment", assignment, "--force")
    notebooks = sorted(p.stem for p in (out / "release" / assignment).glob("*.ipynb"))
    releases = {n: nbformat.read(str(out / "release" / assignment / f"{n}.ipynb"), as_version=4) for n in notebooks}

    with tempfile.TemporaryDirectory(prefix="grading-unzip-") as tmp:
        root = extract_zip(path, Path(tmp)) if path.is_file() and zipfile.is_zipfile(path) else path
        if path.is_file() and root is path:
            raise GradingError(f"{path} is neither a folder nor a zip file")
        subs = collect(root, assignment, notebooks)
        for sub in subs:
            if sub.status != "graded":
                continue
            dest = out / "submitted" / sub.student / assignment
            for name, f in sub.files.items():
                nb, problem = read_notebook(f)
                if nb is None:
                    sub.status = "invalid"
                    sub.problems.append(problem)
                    continue
                if not any(c.source.strip() for c in nb.cells if c.cell_type == "code"):
                    sub.status = "empty"
                    sub.problems.append("empty notebook: no code in it")
                restored = restore_cells(nb, releases[name])
                if restored and sub.status != "empty":
                    sub.notes.append("restored deleted cells: " + ", ".join(restored))
                flags = suspicious(nb)
                if flags:
                    sub.notes.append("flagged for review: " + ", ".join(flags))
                dest.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, str(dest / f"{name}.ipynb"))
            if sub.status == "invalid":
                shutil.rmtree(out / "submitted" / sub.student, ignore_errors=True)
            elif sub.timestamp is not None:
                shutil.copy2(sub.timestamp, dest / "timestamp.txt")

    to_grade = [s.student for s in subs if s.status in ("graded", "empty")]
    by_id = {s.student: s for s in subs}
    total = len(to_grade)
    done = [0]
    lock = threading.Lock()
    db_url = f"sqlite:///{out / 'gradebook.db'}"

    def progress(rep: dict) -> None:
        from nbgrader.api import Gradebook

        sub = by_id[rep["student"]]
        wdb = f"sqlite:///{Path(rep['worker']) / 'gradebook.db'}"
        score = "-"
        if rep["success"]:
            with Gradebook(wdb) as gb:
                try:
                    s = gb.find_submission(assignment, sub.student)
                    score = f"{s.score:g}/{s.max_score:g}"
                except Exception:
                    pass
        with lock:
            done[0] += 1
            echo(
                f"[{done[0]:>{len(str(total))}}/{total}] {sub.student}: "
                + (f"{score} in {rep['seconds']:.1f} s" if rep["success"] else "FAILED"),
                flush=True,
            )

    for s in subs:
        if s.status not in ("graded", "empty"):
            echo(f"[skip] {s.student}: {s.reason}", flush=True)
    reports = run_workers(out, assignment, to_grade, jobs, timeout, progress)

    # merge the workers' grades, autograded notebooks and feedback into the working course
    for student, rep in sorted(reports.items()):
        worker = Path(rep["worker"])
        merge_gradebook(db_url, f"sqlite:///{worker / 'gradebook.db'}", assignment, [student])
        for kind in ("autograded", "feedback"):
            src_dir = worker / kind / student
            if src_dir.is_dir():
                shutil.copytree(src_dir, out / kind / student, dirs_exist_ok=True)
        sub = by_id[student]
        if not rep["success"]:
            sub.status = "failed"
            sub.problems.append(_classify_failure(rep.get("log", "") + "\n" + rep.get("error", ""), timeout))
        else:
            for name in sub.files:
                sub.problems += cell_reasons(
                    out / "autograded" / student / assignment / f"{name}.ipynb",
                    db_url,
                    assignment,
                    student,
                    name,
                    timeout,
                    (rep.get("isolated") or {}).get(name),
                )
                kept = (rep.get("isolated_kept") or {}).get(name)
                if kept:
                    sub.notes.append(KEPT_REASON.format(why=kept["why"][:200], cells=kept["cells"]))
            if not rep.get("feedback"):
                sub.notes.append("feedback HTML could not be generated")

    # scores from the merged gradebook; students not graded score 0 of the assignment's max
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        max_score = gb.find_assignment(assignment).max_score
        for sub in subs:
            sub.max_score = max_score
            try:
                sub.score = gb.find_submission(assignment, sub.student).score
            except Exception:
                sub.score = 0.0
    if to_grade:
        nbgrader(out, "export", "--to", str(out / "nbgrader-export.csv"), check=False)

    fb_dir = out / "feedback-html"
    fb_dir.mkdir(exist_ok=True)
    for sub in subs:
        for name in sub.files:
            html = out / "feedback" / sub.student / assignment / f"{name}.html"
            if html.is_file():
                suffix = "" if len(notebooks) == 1 else f"-{name}"
                shutil.copy2(html, fb_dir / f"{sub.student}{suffix}.html")

    csv_path = out / "grades.csv"
    write_csv(csv_path, subs)
    plot_path = out / "scores.png"
    plot_scores(plot_path, subs, assignment)
    shutil.rmtree(out / "workers", ignore_errors=True)
    return GradeRun(out, subs, csv_path, plot_path, time.monotonic() - t0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``grade`` subcommand's options."""
    p.add_argument(
        "path", help="a folder or a zip: submitted/<student>/<assignment>/*.ipynb, or flat <student>.ipynb files"
    )
    p.add_argument("--assignment", default="reconcile", help="assignment name (default: reconcile)")
    p.add_argument("--jobs", type=int, default=1, help="students graded in parallel (default: 1)")
    p.add_argument(
        "--out",
        default=None,
        help="working course folder (default: ./grading-<assignment>/, wiped if made by an earlier run)",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT,
        help=f"seconds a cell may run before it is interrupted and scores 0 (default: {DEFAULT_TIMEOUT})",
    )
    p.add_argument(
        "--source",
        default=None,
        help="folder with the assignment's source notebooks (default: <course>/solutions/<assignment>)",
    )
    p.add_argument(
        "--course", default=None, help="course root holding solutions/<assignment> (default: this repository)"
    )


def main(args: argparse.Namespace) -> int:
    """Run the ``grade`` command: 0 once the class is graded (broken submissions are reported, not fatal), 2 on a setup error."""
    try:
        run = grade(
            args.path,
            args.assignment,
            jobs=args.jobs,
            out=args.out,
            source=args.source,
            course=args.course,
            timeout=args.timeout,
            echo=_echo,
        )
    except GradingError as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    print()
    print(format_table(run.submissions))
    print()
    n_bad = sum(1 for s in run.submissions if s.status not in ("graded",))
    print(f"{len(run.submissions)} submissions, {n_bad} not graded normally, in {run.seconds:.0f} s")
    print(f"grades:   {run.csv_path}")
    print(f"feedback: {run.out / 'feedback-html'}/<student>.html")
    print(f"plot:     {run.plot_path}")
    return 0


def _echo(*a, flush: bool = False, **kw) -> None:
    print(*a, flush=True, **kw)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit("usage: python -m resumable_core grade PATH --assignment A [--jobs N]")

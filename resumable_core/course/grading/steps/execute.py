"""nbgrader's Execute step, replaced: every learner notebook runs in the sandbox, and only data comes back.

:class:`SandboxedExecute` runs the notebook as the kernel would get it (test cells without their hidden
blocks) in the learner's process, which then stays to serve the re-check (:data:`RUNNING`). Of what comes
back it keeps only the outputs of the cells that ran and are the cells it sent; a cell that did not run gets
an error naming why, so the cells before a crash keep their points; and stderr becomes stdout, since
nbgrader zeroes a test cell that wrote to stderr and a warning must not cost a correct answer its points.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Enum, Float, Integer, Unicode

from resumable_core.lab import i18n

from ... import notebooks
from ...notebook_cells import KEY, NOT_RUN
from ..isolation import BACKENDS, Backend, Limits, make_backend
from ..recheck.driver import answer_is_a_loop
from ..recheck.learner import RESULT_CAP, LearnerProcess
from ..recheck.learner_view import kernel_notebook
from .budget import DEFAULT_TIMEOUT, code_cells, graded_cells, recheck_budget, wall_budget


def _same_cell(sent: Any, got: Any) -> bool:
    """``got`` is ``sent`` (type, id, source, metadata but nbclient's timing), whatever its outputs are."""
    if not isinstance(got, dict):
        return False
    meta = {k: v for k, v in (got.get("metadata") or {}).items() if k != "execution"}
    return (
        got.get("cell_type") == sent.cell_type
        and got.get("id") == sent.get("id")
        and got.get("source") == sent.source
        and meta == {k: v for k, v in sent.metadata.items() if k != "execution"}
    )


def merge_result(sent: Any, result: Any | None, why_stopped: str | None) -> Any:
    """``sent`` with the valid outputs of the cells of the untrusted ``result`` that ran (before its ``done`` mark)
    and are the cells sent; the others get an error naming why."""
    record = (result.metadata.get(KEY) if result is not None else None) or {}
    done: int = record["done"] if isinstance(record.get("done"), int) else 0
    claimed = record.get("stopped")
    why = why_stopped or (str(claimed).splitlines()[0][:200] if claimed else None)
    got_cells = result.cells if result is not None and len(result.cells) == len(sent.cells) else []
    for i, cell in enumerate(sent.cells):
        if cell.cell_type != "code":
            continue
        got = got_cells[i] if i < len(got_cells) and i < done else None
        if got is not None and _same_cell(cell, got) and _valid_outputs(got):
            cell.outputs = list(got.get("outputs", []))
            for o in cell.outputs:  # nbgrader zeroes a test cell that wrote to stderr
                if o.get("output_type") == "stream" and o.get("name") == "stderr":
                    o["name"] = "stdout"
            count = got.get("execution_count")
            cell.execution_count = count if isinstance(count, int) else None
            continue
        reason = f"not run: {why or 'the notebook stopped before this cell'}"
        cell.outputs = [
            nbformat.v4.new_output("error", ename=NOT_RUN, evalue=reason, traceback=[f"{NOT_RUN}: {reason}"])
        ]
        cell.execution_count = None
    return sent


def _valid_outputs(cell: Any) -> bool:
    probe = nbformat.v4.new_code_cell("")
    probe.outputs = cell.get("outputs", [])
    probe.execution_count = cell.get("execution_count") if isinstance(cell.get("execution_count"), int) else None
    nb = nbformat.v4.new_notebook(cells=[probe])
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError:
        return False
    return True


def autograde_preprocessors() -> list[type]:
    """nbgrader's autograde steps with its ``Execute`` replaced by :class:`SandboxedExecute`."""
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import Execute

    steps = Autograde.class_traits()["autograde_preprocessors"].default()
    return [SandboxedExecute if step is Execute else step for step in steps]


class SandboxedExecute(NbGraderPreprocessor):
    """nbgrader's Execute step, run in the sandbox; see the module docstring."""

    timeout = Integer(DEFAULT_TIMEOUT, help="seconds a cell may run before it is interrupted").tag(config=True)
    wall = Integer(0, help="seconds for the whole notebook (0: budget.wall_budget of the release's code cells)").tag(
        config=True
    )
    memory = Integer(
        Limits.memory, help="bytes of memory of the whole sandbox (and of address space of each process in it)"
    ).tag(config=True)
    cpus = Float(Limits.cpus, help="CPUs' worth of time the whole sandbox may use at once").tag(config=True)
    library = Unicode("", help="the pristine copy of resumable_core the sandbox sees").tag(config=True)
    isolation = Enum(
        sorted(BACKENDS), "bwrap", help="what runs learner code: bwrap, or plain (grade --no-sandbox)"
    ).tag(config=True)
    result_cap = Integer(
        RESULT_CAP, help="bytes of the executed notebook: the cells from the one whose outputs pass it are not run"
    ).tag(config=True)

    def backend(self, lang: str | None = None) -> Backend:
        """The backend this config runs learner code in, the one factory of its limits (the re-check's too);
        ``lang``: the notebook's language, which its jobs speak."""
        library = Path(self.library) if self.library else None
        env = {i18n.SETTING: lang} if lang else {}
        return make_backend(self.isolation, library=library, limits=Limits(memory=self.memory, cpus=self.cpus), env=env)

    def release_notebook(self, resources: Any) -> Path | None:
        """The trusted copy of the notebook being graded: the course's ``release/``, else ``source/``; None if neither."""
        ids = resources.get("nbgrader") or {}
        assignment, notebook = ids.get("assignment"), ids.get("notebook")
        if not assignment or not notebook:
            return None
        course = CourseDirectory(config=self.config)
        for step in (course.release_directory, course.source_directory):
            path = Path(course.format_path(step, ".", assignment)) / f"{notebook}.ipynb"
            if path.is_file():
                return path
        return None

    def wall_clock(self, nb: Any, resources: Any) -> float:
        """Seconds the notebook's sandbox may run: ``wall``, else the budget of the release's code cells."""
        if self.wall:
            return float(self.wall)
        release = self.release_notebook(resources)
        n_code = code_cells(release) if release is not None else None
        if n_code is None:  # no course around it (a direct call): only then the submission's own count
            self.log.warning("no release notebook found: the wall clock is counted from the submission's cells")
            n_code = sum(1 for c in nb.cells if c.cell_type == "code")
        return wall_budget(n_code, self.timeout)

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        folder = Path((resources.get("metadata") or {}).get("path") or ".")
        ids = resources.get("nbgrader") or {}
        key = (str(ids.get("student")), str(ids.get("assignment")), str(ids.get("notebook")))
        sent = kernel_notebook(nb)
        release = self.release_notebook(resources)
        n_graded = graded_cells(release) if release is not None else 0
        learner = LearnerProcess.start(
            sent,
            folder,
            key[1],
            timeout=int(self.timeout),
            wall=self.wall_clock(nb, resources) + recheck_budget(n_graded, self.timeout),  # cells, then re-check
            backend=self.backend(notebooks.language(nb)),  # a Korean notebook's learner reads Korean messages
            output_cap=int(self.result_cap),
        )
        started = time.monotonic()
        result, why = learner.executed(self.result_cap)
        if why is None and not answer_is_a_loop(key[1]):
            RUNNING[key] = learner  # serving: the re-check of this notebook calls into it (:mod:`.workers`)
        else:  # ended early, or its re-check needs the loopless library: a fresh process will serve it
            learner.stop()
        self.log.info("executed %s in %.1f s (%s)", key[2], time.monotonic() - started, why or "complete")
        merged = merge_result(sent, result, why)
        for cell, ran in zip(nb.cells, merged.cells, strict=True):  # the outputs onto the cells as graded
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = ran.outputs, ran.execution_count
        return nb, resources


RUNNING: dict[tuple[str, str, str], LearnerProcess] = {}
"""The learner's processes that ran a notebook and still serve, by (student, assignment, notebook)."""


def stop_learners(student: str) -> None:
    """Stop every learner's process of ``student`` still serving (a notebook nothing re-checked)."""
    for key in [k for k in RUNNING if k[0] == student]:
        RUNNING.pop(key).stop()

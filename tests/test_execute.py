"""What the grader takes back from a learner's process (course/grading/steps/execute.py): the outputs of the
cells that ran, never a forged cell; the wall clock's budget; a process that kills what its cells leave."""

from __future__ import annotations

import os
import shutil
import textwrap
import uuid
from pathlib import Path

import nbformat
import pytest

from resumable_core.course.grading.isolation import library_copy
from resumable_core.course.notebook_cells import NOT_RUN

# Skipped only where bwrap is not installed (tests/test_isolation_bwrap.py fails where it is but cannot run).
pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bwrap is not installed (apt-get install bubblewrap)"
)


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    return library_copy(tmp_path_factory.mktemp("lib") / "lib")


@pytest.fixture(autouse=True)
def _stop_serving_learners():
    """A notebook whose cells all ran leaves its learner's process serving (a worker stops it): stop it here."""
    yield
    from resumable_core.course.grading.steps import execute

    for key in list(execute.RUNNING):
        execute.RUNNING.pop(key).stop()


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # the process ended while we looked
            continue
    return found


# --- what the grader takes back (execute.merge_result) -------------------------------------------


def _sent() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("print('ok')", metadata={"nbgrader": {"grade_id": "a", "grade": True, "points": 1}}),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell("import os; os._exit(1)"),
        nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {"grade_id": "b", "grade": True, "points": 2}}),
    ]
    return nb


def _result(sent: nbformat.NotebookNode, done: int, stopped: str | None = None) -> nbformat.NotebookNode:
    got = nbformat.reads(nbformat.writes(sent), as_version=4)
    for cell in got.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="a warning\n")]
            cell.execution_count = 1
    got.metadata["resumable_sandbox"] = {"done": done, "stopped": stopped}
    return got


def test_partial_results_are_kept_and_the_rest_says_why():
    """Cells before the runner's mark keep their outputs (stderr as stdout); the others get an error naming why."""
    from resumable_core.course.grading.steps.execute import merge_result

    sent = _sent()
    merged = merge_result(sent, _result(sent, done=2, stopped="the kernel died"), None)
    first, _, killer, test = merged.cells
    assert first.outputs == [{"output_type": "stream", "name": "stdout", "text": "a warning\n"}]
    for cell in (killer, test):
        assert [(o.output_type, o.ename, o.evalue) for o in cell.outputs] == [
            ("error", NOT_RUN, "not run: the kernel died")
        ]
    merged = merge_result(_sent(), None, "the sandbox hit its wall clock (60 s) limit")
    assert merged.cells[0].outputs[0].evalue == "not run: the sandbox hit its wall clock (60 s) limit"


def test_a_forged_result_cannot_change_the_cells():
    """A result whose cell source, metadata or count differs from what was sent gives that cell no outputs of its."""
    from resumable_core.course.grading.steps.execute import merge_result

    sent = _sent()
    forged = _result(sent, done=4)
    forged.cells[0].source = "pass"
    forged.cells[3].metadata["nbgrader"]["points"] = 100
    merged = merge_result(sent, forged, None)
    assert merged.cells[0].outputs[0].ename == NOT_RUN and merged.cells[3].outputs[0].ename == NOT_RUN
    assert merged.cells[3].metadata["nbgrader"]["points"] == 2 and merged.cells[0].source == "print('ok')"
    assert merged.cells[2].outputs[0].name == "stdout"  # the unchanged cell between keeps its outputs
    sent = _sent()
    shorter = _result(sent, done=4)
    shorter.cells.pop()
    assert all(c.outputs[0].ename == NOT_RUN for c in merge_result(sent, shorter, None).cells if "outputs" in c)


@pytest.mark.slow  # a kernel started in the sandbox: seconds of CPU
def test_a_notebook_runs_in_the_sandbox_and_comes_back_as_data(library, tmp_path):
    """The learner's process in the sandbox: stderr comes back as stdout, writes are thrown away, a kill's later cells say why."""
    from resumable_core.course.grading.steps.execute import SandboxedExecute

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("import sys\nprint('careful', file=sys.stderr)"),
        nbformat.v4.new_code_cell("open('left-behind.txt', 'w').write('x')\nprint(open('data.txt').read())"),
        nbformat.v4.new_code_cell("import os\nos._exit(1)"),
        nbformat.v4.new_code_cell("print('never')"),
    ]
    (tmp_path / "data.txt").write_text("the learner's own file")
    execute = SandboxedExecute(timeout=60, library=str(library), isolation="bwrap")
    out, _ = execute.preprocess(nb, {"metadata": {"path": str(tmp_path), "name": "learner"}})
    assert [(o.output_type, o.name, o.text) for o in out.cells[0].outputs] == [("stream", "stdout", "careful\n")]
    assert out.cells[1].outputs[0].text == "the learner's own file\n"
    assert not (tmp_path / "left-behind.txt").exists()
    for cell in out.cells[2:]:
        assert cell.outputs[0].ename == NOT_RUN and "the learner's process ended" in cell.outputs[0].evalue


LEFT_RUNNING = """
import os, subprocess, sys, time
from pathlib import Path

def running(marker):
    found = 0
    for p in Path("/proc").iterdir():
        try:
            found += p.name.isdigit() and marker.encode() in (p / "cmdline").read_bytes()
        except OSError:
            pass
    return found
"""


def _kernel_notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(src)) for src in sources]
    return nb


@pytest.mark.slow
def test_processes_a_cell_leaves_running_are_killed_with_the_cell(library, tmp_path):
    """A spinning child, a sleeping child and a double-forked daemon left by a cell are gone when the next cell runs."""
    from resumable_core.course.grading.steps.execute import SandboxedExecute

    marker = f"resumable-leftover-{uuid.uuid4().hex}"
    start = f"""
        spinning = subprocess.Popen([sys.executable, "-c", "while True: pass", "{marker}"])
        sleeping = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])
        middle = os.fork()
        if middle == 0:  # the daemon: its parent exits, it lives on in a session of its own
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])
            os._exit(0)
        os.waitpid(middle, 0)
        for _ in range(500):  # until the daemon has exec'd (its cmdline names the marker)
            if running("{marker}") == 3:
                break
            time.sleep(0.02)
        print(running("{marker}"))
        """
    nb = _kernel_notebook(LEFT_RUNNING, start, f"print(running('{marker}'))")
    execute = SandboxedExecute(timeout=60, library=str(library), isolation="bwrap")
    out, _ = execute.preprocess(nb, {"metadata": {"path": str(tmp_path), "name": "learner"}})
    assert [c.outputs[0].text for c in out.cells[1:]] == ["3\n", "0\n"]
    assert _running_with(marker) == []


# --- the wall clock's budget (execute.SandboxedExecute.wall_clock, budget.wall_budget) -----------


def test_added_cells_do_not_stretch_the_wall_clock(tmp_path):
    """A submission with 30 added empty code cells gets the wall clock of the release's code cells, no more."""
    from traitlets.config import Config

    from resumable_core.course.grading.steps.budget import wall_budget
    from resumable_core.course.grading.steps.execute import SandboxedExecute

    release = _kernel_notebook("x = 1", "print(x)", "assert x == 1")
    release.cells.insert(1, nbformat.v4.new_markdown_cell("text"))
    (tmp_path / "release" / "a1").mkdir(parents=True)
    nbformat.write(release, str(tmp_path / "release" / "a1" / "nb.ipynb"))
    submission = nbformat.reads(nbformat.writes(release), as_version=4)
    submission.cells += [nbformat.v4.new_code_cell("") for _ in range(30)]
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    execute = SandboxedExecute(config=config, timeout=10)
    resources = {"nbgrader": {"assignment": "a1", "notebook": "nb"}, "metadata": {"path": str(tmp_path)}}
    assert execute.wall_clock(submission, resources) == execute.wall_clock(release, resources) == wall_budget(3, 10)
    assert wall_budget(3, 10) < wall_budget(33, 10)  # what the submission's own count would have given


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_result_that_is_not_a_regular_file_is_no_result(tmp_path, kind):
    """A result made a link to /dev/zero, a fifo or a folder is refused at once, never read or waited on."""
    from resumable_core.course.grading.recheck.learner import read_result as _read_result

    path = tmp_path / ".result.ipynb"
    {"symlink": lambda: path.symlink_to("/dev/zero"), "fifo": lambda: os.mkfifo(path), "folder": path.mkdir}[kind]()
    result, why = _read_result(path, 1 << 20)
    assert result is None and why in ("the sandbox wrote no result", "the sandbox's result is not a regular file")


FLOOD = "for _ in range(21 * 1024):\n    print('x' * 1023)"
"""A correct answer's debugging print left in: 21 MiB on stdout."""


@pytest.mark.slow
def test_an_output_flood_costs_the_cells_from_the_one_that_flooded(library, tmp_path):
    """The cells before a cell that prints past the output cap keep their outputs; it and the later ones say why."""
    from resumable_core.course.grading.steps.execute import SandboxedExecute

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("print('before')"),
        nbformat.v4.new_code_cell(FLOOD),
        nbformat.v4.new_code_cell("print('after')"),
    ]
    execute = SandboxedExecute(timeout=60, library=str(library), isolation="bwrap")
    assert execute.result_cap == 16 << 20
    out, _ = execute.preprocess(nb, {"metadata": {"path": str(tmp_path), "name": "learner"}})
    assert out.cells[0].outputs[0].text == "before\n"
    for cell in out.cells[1:]:
        assert cell.outputs[0].ename == NOT_RUN
        assert (
            cell.outputs[0].evalue
            == "not run: output flood at cell 1: the outputs passed the 16 MiB output cap (print less)"
        )

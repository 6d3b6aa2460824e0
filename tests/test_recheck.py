"""The isolated re-check (resumable_core/course/grading/recheck.py): the course's checks run in a checker
process that never runs learner code, on the learner's names loaded in a process of their own."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import grading_samples as samples
import nbformat
import pytest
import test_recheck_attacks as attacks  # tests/ is on sys.path under pytest (rootdir-relative import)

from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.course.checks.support import HIDDEN_SENTENCE
from resumable_core.course.grading.errors import UnknownCheckError
from resumable_core.course.grading.isolation import Backend, BwrapBackend, library_copy
from resumable_core.course.grading.recheck import driver as isolated
from resumable_core.course.grading.recheck.plan import check_calls, planned_calls
from resumable_core.course.hidden import reconcile as hidden_reconcile
from resumable_core.course.notebook_cells import graded_sources

REPO = Path(__file__).resolve().parent.parent
SOURCES = {a: REPO / "solutions" / a / f"{a}.ipynb" for a in ASSIGNMENTS}
RECONCILE = SOURCES["reconcile"]

pytestmark = [
    pytest.mark.skipif(not RECONCILE.exists(), reason="the course's notebooks are not there"),
    pytest.mark.slow,
]


BOX: list[Backend] = []
"""The backend every re-run here runs on, as grading runs it (plain where bubblewrap is not installed)."""


@pytest.fixture(scope="module", autouse=True)
def _in_the_sandbox(tmp_path_factory):
    if shutil.which("bwrap") is not None:  # installed: it must run (the re-check fails loudly if it cannot)
        BOX.append(BwrapBackend(library_copy(tmp_path_factory.mktemp("lib") / "lib")))
    yield
    BOX.clear()


def _run(notebook: Path, assignment: str, **kwargs) -> isolated.Report:
    return isolated.run(notebook, assignment, backend=BOX[0] if BOX else None, **kwargs)


def _points(source: Path) -> dict[str, float]:
    nb = nbformat.read(str(source), as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"
    }


def _submit(
    tmp_path: Path, reconcile: str, level1: str = samples.LEVEL1, name: str = "learner", extra_cell: str | None = None
) -> Path:
    nb = samples.submission(
        nbformat.read(str(RECONCILE), as_version=4), samples.answers(reconcile, level1), extra_cell=extra_cell
    )
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


def _failed(report: dict) -> set[str]:
    return {g for g, why in report.items() if why}


def _graded(assignment: str) -> set[str]:
    return set(graded_sources(json.loads(SOURCES[assignment].read_text())))


@pytest.mark.parametrize("assignment", sorted(SOURCES))
def test_every_test_cell_of_the_notebooks_calls_a_bound_check(assignment):
    """Each source test cell's check calls are read from its code and bound to a check function (none unmapped)."""
    plan = planned_calls(json.loads(SOURCES[assignment].read_text()), assignment)
    assert set(plan) == _graded(assignment)
    for gid, calls in plan.items():
        for call in calls:
            assert call.check.__module__.split(".")[2] in ("checks", "hidden"), gid
            assert call.check.__name__.startswith("check_"), gid


def test_check_calls_reads_arguments_and_refuses_what_it_cannot_bind():
    """Names and literals are read as written; an unimported alias or an undefined check is refused, named."""
    setup = ["from resumable_core.course.checks import resume_skeleton as checks"]
    (call,) = check_calls(
        "resume_skeleton", 'print("x")\nchecks.check_state_version_refused(load_state, versions=[2])', setup
    )
    assert call.check.__name__ == "check_state_version_refused"
    assert call.args == (("name", "load_state"),) and call.kwargs == {"versions": [2]}
    with pytest.raises(UnknownCheckError, match=r"hidden\.check_durable_steps"):
        check_calls("resume_skeleton", "hidden.check_durable_steps(save_state)", setup)
    with pytest.raises(UnknownCheckError, match="defines no check_nothing"):
        check_calls("resume_skeleton", "checks.check_nothing(save_state)", setup)
    assert check_calls("no_such_assignment", "print(1)") == []


def test_a_call_in_a_hidden_block_is_not_visible():
    """The calls of a test cell's hidden blocks are marked not visible (the kernel never ran them); the others are."""
    plan = planned_calls(json.loads(RECONCILE.read_text()), "reconcile")
    assert [(c.check.__name__, c.visible) for c in plan["test_unknown_tool"]] == [
        ("check_unknown_tool_not_run", True),
        ("check_unknown_tool", False),
    ]
    assert [c.visible for c in plan["test_side_effect_tools"]] == [False]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(SOURCES))
def test_the_correct_solution_passes_every_check_in_isolation(assignment, tmp_path_factory):
    """The instructor's solution, its answers handed in in the release, passes every mapped test cell in a fresh process."""
    report = attacks.honest(tmp_path_factory.getbasetemp(), assignment, BOX[0] if BOX else None)
    assert set(report) == _graded(assignment)
    assert _failed(report) == set()


@pytest.fixture
def rerun(tmp_path_factory) -> isolated.Report:
    """The rerun-everything sample re-checked on every cell (only=None), once per session: two tests read it."""
    return attacks.once_per_session(
        tmp_path_factory.getbasetemp(),
        "recheck-rerun",
        lambda folder: _run(_submit(folder, samples.REAL_RERUN), "reconcile", source=RECONCILE, timeout=30),
    )


@pytest.mark.slow
def test_rerun_everything_fails_exactly_the_cells_nbgrader_fails(rerun):
    """The rerun-everything solution loses in isolation exactly the points nbgrader takes from it (16 -> 11)."""
    report = rerun
    assert _failed(report) == {"test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"}
    points = _points(RECONCILE)
    kept = sum(p for g, p in points.items() if g in report and not report[g])
    assert kept == samples.SAMPLES["rerun_everything"][2]
    assert "must not be executed" in report["test_reconcile_C"]


@pytest.mark.slow
def test_the_sample_monkeypatch_is_neutralised(tmp_path, rerun):
    """The monkeypatch sample's patches stay in the learner's process: it fails exactly what the plain rerun fails."""
    report = _run(_submit(tmp_path, samples.REAL_MONKEYPATCH), "reconcile", source=RECONCILE, timeout=30)
    assert _failed(report) == _failed(rerun) == {"test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"}
    # a visible check fails in isolation where the patched kernel passed it; the hidden-only cell is an honest failure
    assert {"test_reconcile_C", "test_unknown_tool"} <= set(report.visible_failures)
    assert "test_side_effect_tools" not in report.visible_failures + rerun.visible_failures
    # the learner's process has no hidden checks to patch (the kernel shows the same error when graded)
    assert [e["error"] for e in report.load_errors] == [
        "ModuleNotFoundError: No module named 'resumable_core.course.hidden'"
    ]


HELPER_BELOW = samples.REAL_CORRECT.replace(
    """    if tools.is_read_only(p.name):
        content, err = tools.execute(p.name, p.input), False
    else:
        content, err = rc.STATUS_UNKNOWN, True
""",
    "    content, err = answer_for(p, tools)\n",
    1,
)
HELPER_CELL = """def answer_for(p, tools):
    if tools.is_read_only(p.name):
        return tools.execute(p.name, p.input), False
    return rc.STATUS_UNKNOWN, True"""
DEMO = (
    samples.REAL_CORRECT
    + """

print("try it on the postmortem's crash:")
cell = lab.run_cell("after_tool", "send_email", reconcile)
print(cell.story())
assert cell.row.effects == 1"""
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, reconcile, extra_cell",
    [
        ("read_only_set", samples.REAL_READ_ONLY_SET, None),
        ("helper_in_added_cell", HELPER_BELOW, HELPER_CELL),
        ("top_level_demo", DEMO, None),
    ],
)
def test_honest_variants_pass_every_check_in_isolation(name, reconcile, extra_cell, tmp_path):
    """Top-level sets, a helper in a learner-added cell below, prints and a demo at top level: every check passes."""
    path = _submit(tmp_path, reconcile, extra_cell=extra_cell)
    if extra_cell:  # the helper lives only in a cell below the solution, one without nbgrader metadata
        code = [c for c in nbformat.read(str(path), as_version=4).cells if c.cell_type == "code"]
        at = [i for i, c in enumerate(code) if c.source == extra_cell]
        assert at and "nbgrader" not in code[at[0]].metadata and "def answer_for" not in reconcile
        assert code[at[0] - 1].metadata["nbgrader"]["grade_id"] == "reconcile_turn"  # the last answer cell
    report = _run(path, "reconcile", source=RECONCILE, timeout=30)
    assert set(report) == _graded("reconcile")
    assert _failed(report) == set(), report
    assert report.load_errors == [] and report.inconclusive is None


@pytest.mark.slow
def test_a_learner_cell_that_raises_outside_a_kernel_raises_where_it_is_graded(tmp_path):
    """No Jupyter kernel runs the cells: a cell that raises without one raises in the one process, named in the reason."""
    only_in_kernel = (
        "import sys\nif 'ipykernel' not in sys.modules:\n    raise RuntimeError('no kernel')\n" + samples.REAL_CORRECT
    )
    report = _run(
        _submit(tmp_path, only_in_kernel), "reconcile", source=RECONCILE, only=["test_reconcile_B"], timeout=30
    )
    assert "reconcile is not defined" in report["test_reconcile_B"]
    assert "cell 'reconcile' raised RuntimeError: no kernel" in report["test_reconcile_B"]
    assert report.inconclusive is None  # the cells ran where the checks call them: nothing to disagree with


@pytest.mark.slow
def test_an_error_the_kernel_showed_too_keeps_the_rerun_conclusive(tmp_path):
    """A cell that raised in the kernel as well (its error output is in the notebook) loads the same way: conclusive."""
    path = _submit(tmp_path, samples.REAL_RERUN + "\n\n1 / 0")
    nb = nbformat.read(str(path), as_version=4)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "reconcile":
            c.outputs = [
                nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])
            ]
    nbformat.write(nb, str(path))
    report = _run(path, "reconcile", source=RECONCILE, only=["test_reconcile_B", "test_reconcile_C"], timeout=30)
    assert report["test_reconcile_B"] is None and "must not be executed" in report["test_reconcile_C"]
    assert report.load_errors == [
        {
            "cell": "cell 'reconcile'",
            "error": "ZeroDivisionError: division by zero",
            "kernel": "ZeroDivisionError: division by zero",
        }
    ]
    assert report.inconclusive is None


PATCH_AT_IMPORT = (
    samples.REAL_RERUN
    + """

def staticmethod(f):  # shadows the builtin: "@staticmethod" below calls this at definition time
    for _name in dir(checks):
        if _name.startswith("check_"):
            setattr(checks, _name, lambda *a, **kw: None)
    checks.CountingToolbox.count = lambda self, name=None: 0
    real = rc.Toolbox.execute
    rc.Toolbox.execute = lambda self, name, input, idempotency_key=None: (
        "sent" if name == "send_email" else real(self, name, input, idempotency_key=idempotency_key))
    return f

@staticmethod
def helper():
    pass
"""
)


@pytest.mark.slow
def test_a_patch_run_at_definition_time_is_undone(tmp_path):
    """A learner def run at import (as a decorator) that patches the checks, the spy and Toolbox.execute changes no result."""
    report = _run(_submit(tmp_path, PATCH_AT_IMPORT), "reconcile", source=RECONCILE, timeout=30)
    assert _failed(report) == {"test_reconcile_C", "test_side_effect_tools", "test_unknown_tool"}


PATCH_DURING_CHECK = samples.REAL_RERUN.replace(
    "    p = cp.pending_tool_use\n",
    "    from resumable_core.course.checks import support as _g\n"
    "    _g.CountingToolbox.count = lambda self, name=None: 0\n"
    "    p = cp.pending_tool_use\n",
    1,
)


@pytest.mark.slow
def test_a_patch_made_while_a_check_runs_reaches_only_the_learners_process(tmp_path):
    """A reconcile that patches the call spy while it runs patches its own process: the checker's spy still counts."""
    report = _run(
        _submit(tmp_path, PATCH_DURING_CHECK),
        "reconcile",
        source=RECONCILE,
        only=["test_reconcile_A", "test_reconcile_B", "test_reconcile_C"],
        timeout=30,
    )
    assert _failed(report) == {"test_reconcile_C"} and "must not be executed" in report["test_reconcile_C"]


@pytest.mark.slow
def test_level1_answers_are_checked_against_the_hidden_assertions(tmp_path):
    """A valid but wrong level-1 answer fails only its cell; with the release (no hidden tests) only validity counts."""
    wrong = samples.LEVEL1.replace('"C": "is_error_fallback"', '"C": "rerun_tool"')
    path = _submit(tmp_path, samples.REAL_CORRECT, wrong)
    only = ["test_level1_A", "test_level1_B", "test_level1_C"]
    report = _run(path, "reconcile", source=RECONCILE, only=only, timeout=30)
    assert report["test_level1_A"] is None and report["test_level1_B"] is None
    assert report["test_level1_C"] == getattr(hidden_reconcile.check_action, HIDDEN_SENTENCE)()  # its sentence alone
    release = REPO / "exercises" / "reconcile" / "reconcile.ipynb"
    if release.exists():
        assert _failed(_run(path, "reconcile", source=release, only=only, timeout=30)) == set()


@pytest.mark.slow
def test_stdout_writes_and_exits_cannot_forge_the_result(tmp_path):
    """Prints and raw writes to fd 1 go nowhere; a function that ends its own process fails the check that called it."""
    forging = samples.REAL_RERUN.replace(
        "    p = cp.pending_tool_use\n",
        "    import os\n    print('{}')\n    os.write(1, b'{}\\n')\n    p = cp.pending_tool_use\n",
        1,
    )
    report = _run(
        _submit(tmp_path, forging),
        "reconcile",
        source=RECONCILE,
        only=["test_reconcile_B", "test_reconcile_C"],
        timeout=30,
    )
    assert report["test_reconcile_B"] is None and "must not be executed" in report["test_reconcile_C"]
    exiting = samples.REAL_CORRECT.replace(  # only on checkpoint B's read_file: the notebook's own demo runs through
        "    p = cp.pending_tool_use\n",
        "    import os\n    if cp.pending_tool_use and cp.pending_tool_use.name == 'read_file':\n        os._exit(0)\n"
        "    p = cp.pending_tool_use\n",
        1,
    )
    report = _run(
        _submit(tmp_path, exiting, name="exits"), "reconcile", source=RECONCILE, only=["test_reconcile_B"], timeout=30
    )
    assert "the learner's process ended during the call" in report["test_reconcile_B"]
    assert report.inconclusive is None


@pytest.mark.slow
def test_a_learners_process_that_ends_in_its_cells_leaves_the_rerun_inconclusive(tmp_path):
    """A notebook whose cell ends its process never serves: every cell asked about is inconclusive, with that reason."""
    path = _submit(tmp_path, samples.REAL_CORRECT, extra_cell="import os\nos._exit(0)")
    only = ["test_reconcile_B", "test_unknown_tool"]
    report = _run(path, "reconcile", source=RECONCILE, only=only, timeout=30)
    assert (report.inconclusive or "").startswith("the learner's process ended before the re-check")
    assert dict(report) == dict.fromkeys(only, report.inconclusive)


SNOOP = samples.REAL_CORRECT.replace(
    "    p = cp.pending_tool_use\n",
    "    import gc, sys\n"
    "    if [m for m in sys.modules if '.hidden' in m] or any(\n"
    "        isinstance(o, dict) and 'check_action' in o for o in gc.get_objects()):\n"
    "        raise RuntimeError('the hidden checks are in this process')\n"
    "    p = cp.pending_tool_use\n",
    1,
)


@pytest.mark.slow
def test_the_learners_function_runs_where_no_hidden_check_is(tmp_path):
    """While the hidden checks call it, the learner's function finds no hidden module or check in its process."""
    report = _run(_submit(tmp_path, SNOOP), "reconcile", source=RECONCILE, timeout=30)
    assert set(report) == _graded("reconcile") and _failed(report) == set(), report


ANSWER_KEY = samples.LEVEL1.replace(
    "RESUME_ACTION = {", "from resumable_core.course.hidden.reconcile import ANSWER_KEY\nRESUME_ACTION = {", 1
)


@pytest.mark.slow
def test_the_level1_answer_key_cannot_be_imported_by_the_learner(tmp_path):
    """A level-1 cell that imports the hidden answer key fails to load in the learner's process (in the sandbox)."""
    if not BOX:
        pytest.skip("bwrap is not installed (apt-get install bubblewrap)")
    only = ["test_level1_A"]
    report = _run(_submit(tmp_path, samples.REAL_CORRECT, ANSWER_KEY), "reconcile", source=RECONCILE, only=only)
    assert "No module named 'resumable_core.course.hidden'" in report["test_level1_A"]


STEAL_THE_SOURCE = """import os
raise RuntimeError(repr(sorted(os.listdir("/grading/in"))) + repr(sorted(os.listdir("/grading"))))"""


@pytest.mark.slow
def test_the_learners_process_gets_no_source_notebook(tmp_path):
    """The learner's sandbox holds the submission, the release's setup cells and the host's marks, never the source notebook."""
    if not BOX:
        pytest.skip("bwrap is not installed (apt-get install bubblewrap)")
    report = _run(
        _submit(tmp_path, STEAL_THE_SOURCE), "reconcile", source=RECONCILE, only=["test_reconcile_B"], timeout=30
    )
    assert (
        report.load_errors[0]["error"]
        == "RuntimeError: ['notebook.ipynb']['control', 'in', 'lib', 'rpc', 'scratch', 'shared']"
    )


def test_a_restarted_call_is_served_by_a_newly_started_learners_process(tmp_path):
    """A restarted call runs in a new interpreter that ran the cells again but the tests: per-process state is new."""
    from resumable_core.course.grading.isolation import PlainBackend
    from resumable_core.course.grading.recheck.boundary import Learner, RemoteFunction
    from resumable_core.course.grading.recheck.learner import SOCKET

    nb = nbformat.v4.new_notebook()
    answer = (
        "import os, uuid\nRUN = uuid.uuid4().hex  # once per process\n"
        "def who():\n    return [RUN, os.getpid(), globals().get('TESTED', False)]"
    )
    test = "TESTED = True"
    nb.cells = [nbformat.v4.new_code_cell(answer), nbformat.v4.new_code_cell(test)]
    nb.cells[1].metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 1}
    backend = BOX[0] if BOX else PlainBackend()
    process = isolated.LearnerProcess.start(nb, None, "postmortem", timeout=30, wall=120, backend=backend)
    try:
        assert process.executed(1 << 20)[1] is None
        rpc, shared, restart = process.layout.host("rpc") / SOCKET, process.layout.host("shared"), process.restarter
        learner = Learner(str(rpc), shared, restart=str(restart.address))
        who = RemoteFunction(learner, "who")  # one call tells the process and whether it ran the test cell
        loaded = who()
        assert who()[0] == loaded[0] and loaded[2] is True  # a fork of the loaded process: its uuid, its test cell
        first, second = who.restarted()(), who.restarted()()
        assert len({loaded[0], first[0], second[0]}) == 3 and loaded[1] not in (first[1], second[1])
        assert first[2] is False and second[2] is False  # each new interpreter ran the cells but the tests
    finally:
        process.stop()


def test_a_restarted_call_gets_a_settled_fresh_process(tmp_path):
    """Each restarted call's fresh job is settled (it finds every file it opens cached); the loaded job need not be,
    and pays nothing for it."""
    from resumable_core.course.grading.isolation import Job, Outcome, PlainBackend
    from resumable_core.course.grading.recheck import restarter

    did: list[str] = []

    class Spy(PlainBackend):
        def run(self, job: Job) -> Outcome:
            did.append(f"run settled={job.settled}")
            return Outcome(0, b"", b"", None, 0.0)

    folder = tmp_path / "loaded" / "restart"
    folder.mkdir(parents=True)
    fresh = restarter.Restarter(folder, Spy(), lambda at, _: Job(("true",), at), Job(("true",), tmp_path))
    at = os.open(folder, os.O_PATH | os.O_DIRECTORY)  # TMPDIR may be deeper than a socket's address holds
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(f"/proc/self/fd/{at}/{restarter.RESTART_SOCKET}")
        client.settimeout(30)
        assert client.recv(1) == b""  # the spy's job never asked for it: closed
    os.close(at)
    fresh.close(30)
    assert did == ["run settled=True"]


def test_the_restarters_sockets_listen_however_deep_the_hosts_folder(tmp_path):
    """A socket's address holds 107 bytes; the host's folders under TMPDIR may be deeper, and the restarter still binds."""
    from resumable_core.course.grading.recheck import restarter

    deep = tmp_path.joinpath(*["a-folder-name-of-forty-characters-long--"] * 4)
    deep.mkdir(parents=True)
    assert len(str(deep / restarter.RESTART_SOCKET)) > 108
    with restarter._listen(deep / restarter.RESTART_SOCKET, 1) as listener:
        assert (deep / restarter.RESTART_SOCKET).is_socket()
        folder = os.open(deep, os.O_PATH | os.O_DIRECTORY)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(f"/proc/self/fd/{folder}/{restarter.RESTART_SOCKET}")
                conn, _ = listener.accept()
                conn.close()
        finally:
            os.close(folder)

"""The ``resume`` exercise's report agent grades the learner's ``resume_report`` by the checker's world, under
real kills: the notebook's solution passes every report cell, each plausible wrong answer fails a cell its
bug breaks (so scores lower), the report cells carry most of the points, every rule of the contract is
tested by a check a cell calls, and the kit ships no function that runs or resumes the agent.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import shutil

import exercise_cells  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest
import test_resume_exercise as exercise  # tests/ is on sys.path under pytest (rootdir-relative import)

from resumable_core.course.assignments import REGISTRY
from resumable_core.course.checks import resume as checks
from resumable_core.course.grading.isolation import BwrapBackend, library_copy
from resumable_core.course.grading.recheck import driver as isolated
from resumable_core.course.hidden import resume as hidden
from resumable_core.errors import ToolError
from resumable_core.lab import report_agent as ra
from resumable_core.tools import Effect

SOLUTION = exercise.REPORT_SOLUTION


edited = functools.partial(exercise_cells.edited, SOLUTION)


LOOKUP = (
    '        if tools.execute("notification_status", {"key": note["key"]}) != ra.SENT:\n'
    '            tools.execute("notify_reviewer", {"report_sha256": digest, "key": note["key"]})\n'
)
RESEND = '        tools.execute("notify_reviewer", {"report_sha256": digest, "key": note["key"]})\n'
REPORT_CHECK = '        if on_disk != report["sha256"] or report["sha256"] != ra.sha256_text(text):\n'
CANCEL = (
    '    if tools.execute("task_status", {"task_id": task["task_id"]}) != ra.ACTIVE:\n'
    "        return cp  # cancelled: the permission in the file is no permission now\n"
)
VERSION = (
    '    if cp.get("version") != ra.CHECKPOINT_VERSION:\n'
    '        raise rc.CheckpointVersionError(path, cp.get("version"), ra.CHECKPOINT_VERSION)\n'
)
TASK = (
    '    if cp.get("task_id") != task["task_id"] or cp.get("docs") != task["docs"]:\n'
    '        raise rc.CheckpointTaskMismatchError(path, task["task_id"], str(cp.get("task_id")))\n'
)
CHANGED = (
    '        if record is not None and tools.execute("doc_sha256", {"name": name}) != record["sha256"]:\n'
    "            record = None\n"
)
INTENT = "        save(cp)  # the intent and its key, before the effect\n"
NEW_NOTE = '    if note is None or note["report_sha256"] != digest:  # a new report: a new notification\n'
KEY = 'note = {"key": f"{task[\'task_id\']}-{digest[:12]}"'
LOAD = '        with open(path, encoding="utf-8") as f:\n            cp = json.load(f)\n'

WRONG: dict[str, tuple[str, str]] = {
    # (the learner's resume_report, the test cell it must fail)
    "resends_a_pending_notification": (edited((LOOKUP, RESEND)), "test_report_pending_notification"),
    "trusts_the_recorded_report": (
        edited((REPORT_CHECK, '        if report["sha256"] != ra.sha256_text(text):\n')),
        "test_report_record_vs_reality",
    ),
    "redoes_every_step": (
        edited((LOAD, LOAD + '        cp = {**cp, "read": {}, "report": None, "notification": None}\n')),
        "test_report_pending_notification",
    ),
    "ignores_cancellation": (edited((CANCEL, "")), "test_report_cancelled"),
    "skips_the_version_check": (edited((VERSION, "")), "test_report_refusals"),
    "no_task_check": (edited((TASK, "")), "test_report_refusals"),
    "checks_the_task_id_but_not_the_scope": (
        edited((TASK, TASK.replace(' or cp.get("docs") != task["docs"]', ""))),
        "test_report_refusals",
    ),
    "rereads_every_document_on_a_change": (
        edited(
            (
                CHANGED,
                '        if record is not None and tools.execute("doc_sha256", {"name": name}) != record["sha256"]:\n'
                "            cp['read'] = {}\n            record = None\n",
            ),
            ('    for name in cp["docs"]:', '    for name in list(cp["docs"]) * 2:'),
        ),
        "test_report_changed_doc",
    ),
    "trusts_the_recorded_reads": (edited((CHANGED, "")), "test_report_changed_doc"),
    "no_new_notification_for_a_new_report": (
        edited((NEW_NOTE, "    if note is None:\n")),
        "test_report_changed_doc",
    ),
    "a_fresh_key_after_the_send": (
        edited(
            (KEY, 'note = {"key": __import__("uuid").uuid4().hex'),
            (INTENT, ""),
        ),
        "test_report_kills_in_your_run",
    ),
    "checks_cancellation_after_reading": (
        edited(
            (CANCEL, ""),
            (
                '    text = ra.report_text({name: r["summary"]',
                CANCEL + '    text = ra.report_text({name: r["summary"]',
            ),
        ),
        "test_report_cancelled_at_every_boundary",
    ),
}

REPORT_CELLS = {gid for gid in exercise.graded_cells() if gid.startswith("test_report_")}


def learner(source: str) -> dict:
    """The learner's names after the notebook's setup cells and ``source``, as in the kernel."""
    return exercise.learner(source)


def test_the_report_cells_carry_most_of_the_points():
    """The report agent's cells are worth more than every other cell of the assignment together."""
    cells = exercise.graded_cells()
    report = sum(points for gid, (points, _) in cells.items() if gid in REPORT_CELLS)
    rest = sum(points for gid, (points, _) in cells.items() if gid not in REPORT_CELLS)
    assert report > rest, (report, rest)


def test_every_rule_of_the_contract_is_checked_by_a_cell():
    """Each bullet of the report task's contract maps to checks, and each of those is called by a test cell."""
    markdown = next(c["source"] for c in exercise.NOTEBOOK["cells"] if c["id"] == "report_task")
    bullets = markdown.split("**The contract.**\n\n", 1)[1].split("\n\n", 1)[0]
    rules = [line.removeprefix("- ") for line in bullets.splitlines()]
    assert set(rules) <= set(hidden.CONTRACT)  # Part 1's rules are the others (tests/test_contracts.py: no more)
    called = {call.check.__name__ for _, calls in exercise.graded_cells().values() for call in calls}
    for rule, names in hidden.CONTRACT.items():
        assert names and set(names) <= called, rule


def test_the_kit_runs_no_report_agent():
    """The lab module holds the world and the tools: no function of it, or of the visible checks, calls a side effect."""
    assert {t.name for t in ra.REPORT_TOOLS if t.effect is Effect.SIDE_EFFECT} == {"save_report", "notify_reviewer"}
    for module in (ra, checks):
        source = inspect.getsource(module)
        for name in ("save_report", "notify_reviewer"):
            assert not re.search(rf"execute\(\s*[\"']{name}", source), (module.__name__, name)


@pytest.mark.slow
def test_the_solution_passes_every_report_cell():
    """The notebook's resume_report passes every report cell, visible and hidden, under real SIGKILLs."""
    ns = learner(SOLUTION)
    cells = exercise.graded_cells()
    failed = {gid: why for gid in REPORT_CELLS if (why := exercise.failure(cells[gid][1], ns))}
    assert failed == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_resume_report_scores_lower(name):
    """Each plausible wrong answer fails the test cell its bug breaks, with a message about that bug."""
    source, cell = WRONG[name]
    exercise_cells.require_fails(name, cell, exercise.graded_cells(), learner(source))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resends_a_pending_notification", "trusts_the_recorded_report"])
def test_the_isolated_recheck_fails_the_same_cells(name, tmp_path):
    """In the sandboxed re-check (the learner's code in a process of its own, the world in the checker's), a wrong
    resume_report loses exactly the cells it loses in the kernel: the checker judges by its own world."""
    cells = exercise.graded_cells()
    ns = learner(exercise.SOLUTION + "\n" + WRONG[name][0])
    in_kernel = {gid for gid, (_, calls) in cells.items() if exercise.failure(calls, ns)}
    assert WRONG[name][1] in in_kernel
    source = exercise.course.notebook_path("resume")
    nb = nbformat.read(str(source), as_version=4)
    for cell in nb.cells:
        if cell.get("id") == "resume_report":
            cell.source = WRONG[name][0]
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    backend = BwrapBackend(library_copy(tmp_path / "lib")) if shutil.which("bwrap") else None
    report = isolated.run(path, "resume", backend=backend, source=source, timeout=60)
    assert {gid for gid, why in report.items() if why} == in_kernel


@pytest.mark.slow
def test_no_kit_callable_or_lesson_function_resumes_the_report_agent():
    """No public three-argument callable of the kit, and no lesson definition, passes the report agent's checks."""
    import test_no_answers as no_answers  # tests/ is on sys.path under pytest

    graded = no_answers.graded(REGISTRY["resume"])
    assert graded.arity["resume_report"] == 3
    report = [c for c in graded.cells if c.functions == {"resume_report"}]
    candidates = {**no_answers.kit_callables(3), **no_answers.every_lesson_definition()[0]}
    fitting = {name: fn for name, fn in candidates.items() if no_answers._fits(fn, 3)}
    assert report and fitting, "no cell or no candidate was found: the test would grade nothing"
    full = [name for name, fn in fitting.items() if no_answers.passes_each(report, {"resume_report": fn})]
    assert full == []


def test_the_report_world_is_real_and_its_provider_does_not_dedupe(tmp_path):
    """The tools act on files and SQLite: a report is a file with its hash, every notify pings, paths stay inside."""
    world = ra.ReportWorld.create(tmp_path / "world")
    tools = ra.report_toolbox(world)
    text = tools.execute("read_doc", {"name": "pricing.md"})
    assert tools.execute("doc_sha256", {"name": "pricing.md"}) == ra.sha256_text(text)
    saved = json.loads(tools.execute("save_report", {"text": "# r\n"}))
    assert saved == {"path": "reports/report-1.md", "sha256": ra.sha256_text("# r\n")}
    assert tools.execute("report_sha256", {"path": saved["path"]}) == saved["sha256"]
    assert tools.execute("notification_status", {"key": "k"}) == ra.NOT_SENT
    for _ in range(2):
        tools.execute("notify_reviewer", {"report_sha256": saved["sha256"], "key": "k"})
    assert len(world.notifications()) == 2 and tools.execute("notification_status", {"key": "k"}) == ra.SENT
    assert tools.execute("task_status", {"task_id": "report-17"}) == ra.ACTIVE
    world.cancel("report-17")
    assert tools.execute("task_status", {"task_id": "report-17"}) == ra.CANCELLED
    for name, bad in (("read_doc", {"name": "../world.sqlite"}), ("report_sha256", {"path": "reports/../docs/x"})):
        with pytest.raises(ToolError):
            tools.execute(name, bad)
    assert world.reads() == 1 and world.saved_reports() == ["reports/report-1.md"]


@pytest.mark.parametrize(
    ("name", "check", "where"),
    [
        ("skips_the_version_check", checks.check_report_fresh_start, "lesson 1, section 5"),
        ("no_task_check", checks.check_report_fresh_start, "lesson 1, section 7"),
        ("trusts_the_recorded_report", checks.check_report_changed_doc, "lesson 4, section 1"),
    ],
)
def test_the_lessons_refusals_and_record_vs_reality_fail_a_visible_check(name, check, where):
    """No version check, no task check, a saved report trusted unhashed: each fails a visible check naming the section."""
    with pytest.raises(checks.CheckFailed, match=re.escape(where)):
        check(exercise.learner(WRONG[name][0])["resume_report"])


def test_the_solution_passes_the_extended_visible_checks():
    """The worked resume_report passes the visible checks the refusals and the edited report joined."""
    fn = exercise.learner(SOLUTION)["resume_report"]
    checks.check_report_fresh_start(fn)
    checks.check_report_changed_doc(fn)

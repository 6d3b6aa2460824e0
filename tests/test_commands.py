"""The project's commands: `make lab` serves the lessons, `.ci/run` calls `make test`, every --help, and a learner's work."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from resumable_core import __main__ as cli
from resumable_core.course import notebooks, release, student_kit
from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.crash import CRASH_POINTS
from resumable_core.lab.exercise_checkpoints import NAMES
from resumable_core.scenarios import SCENARIOS, one_call_scenarios
from resumable_core.strategies import STRATEGIES, matrix_strategies

ROOT = Path(__file__).resolve().parents[1]
LAB_START_POLLS = 480  # half a second apart: a safety net for a loaded machine, not a speed requirement


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_answer(target: str, variable: str, path: str, read: Callable[[str], bool], what: str) -> None:
    """Run `make <target>` with a server on a free port (``variable`` carries the flags); poll ``path`` until ``read``.

    ``read(url)`` opens the URL and returns True once the page is right (its asserts are the test's);
    an OSError means the server is not up yet. The server's whole process group is stopped after.
    """
    port = _free_port()
    args = f"--no-browser --port={port} --ServerApp.token=kit-test --ServerApp.ip=127.0.0.1"
    proc = subprocess.Popen(
        ["make", "-s", target, f"{variable}={args}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(LAB_START_POLLS):
            try:
                if read(f"http://127.0.0.1:{port}{path}"):
                    return
            except OSError:
                assert proc.poll() is None, f"make {target} exited early"
                time.sleep(0.5)
        raise AssertionError(f"{what} did not answer after {LAB_START_POLLS} polls")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.slow
def test_make_lab_serves_lesson_one():
    """`make lab` starts JupyterLab and serves lesson 1 (here without a browser, on a free port)."""

    def lesson_one(url: str) -> bool:
        with urllib.request.urlopen(url, timeout=2) as r:
            assert r.status == 200
            return True

    path = "/api/contents/lessons/01_skeleton_resume.ipynb?token=kit-test&content=0"
    _first_answer("lab", "LAB_ARGS", path, lesson_one, "JupyterLab")


def test_ci_runs_make_test():
    """CI's script ends in `make test`, the same command a developer runs."""
    lines = [
        ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    ]
    assert lines[-1] == "make test"


def test_make_test_hands_each_worker_whole_files_longest_first(pytestconfig, monkeypatch):
    """`make test` runs the suite with `-n 2 --dist loadfile`, whose scheduler keeps a file's tests on one worker (its
    module fixtures paid once) but for the files in SPLIT_ACROSS_WORKERS, and hands out the LONGEST_FIRST files first."""
    pytest.importorskip("xdist")
    import conftest  # tests/ is on sys.path under pytest (rootdir-relative import)

    makefile = (ROOT / "Makefile").read_text()
    test_line = next(ln for ln in makefile.splitlines() if ln.startswith("test:"))
    assert "test-suite" in makefile.split(test_line, 1)[1].split("\n\n", 1)[0]  # make test runs the suite
    suite_line = next(ln for ln in makefile.splitlines() if ln.startswith("test-suite:"))
    recipe = makefile.split(suite_line, 1)[1].splitlines()[1]
    assert "-n 2 --dist loadfile" in recipe
    assert all((ROOT / f).is_file() for f in (*conftest.SPLIT_ACROSS_WORKERS, *conftest.LONGEST_FIRST))
    monkeypatch.setattr(pytestconfig.option, "dist", "loadfile")
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"])  # what -n 2 sets
    scheduler = conftest.pytest_xdist_make_scheduler(pytestconfig, None)
    split = conftest.SPLIT_ACROSS_WORKERS[0]
    ids = [
        "tests/test_lease.py::a",
        "tests/test_lease.py::C::b[1]",
        f"{split}::c",
        f"{split}::d",
        "tests/test_grading.py::e",
    ]

    class Node:
        def __init__(self) -> None:
            self.sent: list[list[int]] = []

        def send_runtest_some(self, indices: list[int]) -> None:
            self.sent.append(indices)

    node = Node()
    scheduler.registered_collections[node] = ids
    for nodeid in ids:
        scheduler.workqueue.setdefault(scheduler._split_scope(nodeid), {})[nodeid] = False
    while scheduler.workqueue:
        scheduler._assign_work_unit(node)
    assert node.sent == [[4], [2], [3], [0, 1]]  # test_grading, the split file's tests one by one, then the rest


def test_readme_starts_with_the_two_commands():
    """The README's first commands are `make lab` and `make test`."""
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```")[1]
    commands = [ln.split("#")[0].strip() for ln in first_block.splitlines() if ln.strip().startswith("make")]
    assert commands == ["make lab", "make test"]


def readme_make_targets() -> set[str]:
    """Every ``make TARGET`` the README names in code: inline (`make x ...`) or a line of a code block."""
    text = (ROOT / "README.md").read_text()
    inline = re.findall(r"`make ([a-z][a-z-]*)", text)
    blocks = text.split("```")[1::2]
    lines = [ln.strip() for block in blocks for ln in block.splitlines()]
    return set(inline) | {ln.split()[1] for ln in lines if ln.startswith("make ") and len(ln.split()) > 1}


KIT_ONLY_TARGETS = {"check"}
"""Targets of the kits' Makefile (the README says so where it names them), not this repository's."""


def test_every_make_target_the_readme_names_exists():
    """`make -n TARGET` (a dry run: nothing is built) succeeds for each target the README names; a kit's target is a rule of the kits' Makefile."""
    targets = readme_make_targets()
    assert {"lab", "test", "student-kit", "self-study-kit", "release", "grade", "check"} <= targets
    kit_rules = set(re.findall(r"(?m)^([a-z][a-z-]*):", (ROOT / "resumable_core/course/kit/Makefile").read_text()))
    for target in sorted(targets):
        if target in KIT_ONLY_TARGETS:  # a built kit runs it: tests/test_self_study_kit.py and test_student_kit.py
            assert target in kit_rules, f"make {target}: no such rule in the kits' Makefile"
            continue
        done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"make {target}: {done.stderr.strip()}"


# -- every command's --help ----------------------------------------------------------------

RST_MARKUP = re.compile(r"``|:(?:func|mod|class|meth|data|attr|obj|exc|ref):`")
COUNT_WORDS = re.compile(r"\ball (?:two|three|four|five|six|seven|eight|nine|ten|\d+)\b", re.I)


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser a learner or instructor can ask for --help, by its prog."""
    top = cli.build_parser()
    found = {top.prog: top}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update({parser.prog: parser for parser in action.choices.values()})
    for parser in (release.build_parser(), student_kit.build_parser()):
        found[parser.prog] = parser
    return found


def _choices(prog: str) -> dict[str, list[str]]:
    """The choices of each option of one command, by the option's dest."""
    return {a.dest: list(a.choices) for a in command_parsers()[prog]._actions if a.choices and a.dest != "command"}


def test_every_command_has_a_parser_here() -> None:
    """The walk below reaches the CLI's five commands and the two module commands."""
    progs = set(command_parsers())
    commands = {"matrix", "simulate", "fixtures", "check", "grade"}
    assert {f"python -m resumable_core {c}" for c in commands} <= progs
    assert {"python -m resumable_core.course.release", "python -m resumable_core.course.student_kit"} <= progs


@pytest.mark.parametrize("prog", sorted(command_parsers()))
def test_help_describes_every_option_in_plain_text(prog: str) -> None:
    """Every option and subcommand has help, each choice is named, and no reST markup or hand-written count shows."""
    parser = command_parsers()[prog]
    text = parser.format_help()
    assert not RST_MARKUP.search(text), RST_MARKUP.search(text)
    assert not COUNT_WORDS.search(text), f"{prog}: a count written by hand goes stale: {COUNT_WORDS.search(text)}"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert all(choice.help for choice in action._choices_actions), prog
            continue
        assert action.help and action.help != argparse.SUPPRESS, f"{prog}: {action.option_strings or action.dest}"
        assert all(str(choice) in text for choice in action.choices or ()), f"{prog}: {action.dest}"


def test_help_choices_and_defaults_come_from_the_registries() -> None:
    """Choices and the defaults named in help are the registries' (strategies, scenarios, crash points, assignments)."""
    matrix, simulate = _choices("python -m resumable_core matrix"), _choices("python -m resumable_core simulate")
    assert matrix["strategy"] == simulate["strategy"] == list(STRATEGIES)
    assert matrix["scenario"] == simulate["scenario"] == list(SCENARIOS)
    assert simulate["crash_at"] == list(CRASH_POINTS)
    assert _choices("python -m resumable_core.course.release") == {"assignment": list(ASSIGNMENTS)}
    assert list(release.COMMANDS) == [
        "release",
        "check",
        "points",
    ]
    helps = {prog: " ".join(parser.format_help().split()) for prog, parser in command_parsers().items()}
    assert f"(default: {', '.join(matrix_strategies())})" in helps["python -m resumable_core matrix"]
    assert f"(default: {', '.join(one_call_scenarios())})" in helps["python -m resumable_core matrix"]
    grade = helps["python -m resumable_core grade"]
    assert f"this course has {', '.join(ASSIGNMENTS)} (default: {ASSIGNMENTS[0]})" in grade
    assert f"checkpoints {', '.join(NAMES[:-1])} and {NAMES[-1]}" in helps["python -m resumable_core fixtures"]


# -- a learner's work in exercises/ and the release check -----------------------------------


def solved(assignment: str) -> dict[str, str]:
    """The instructor's answers of an assignment: grade_id -> the solution cell's source."""
    source = notebooks.read(release.notebook_path(assignment))
    return {
        c.metadata["nbgrader"]["grade_id"]: notebooks.source(c)
        for c in source.cells
        if c.metadata["nbgrader"]["solution"]
    }


def worked_in(released: Path) -> dict:
    """The released notebook as a learner leaves it: answers written, run, saved by Jupyter, a cell added."""
    nb = release.fill_in(released, solved(released.stem))
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"}
    for cell in nb["cells"]:
        cell["metadata"]["scrolled"] = True
        if cell["cell_type"] == "code":
            cell["execution_count"] = 7
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"}]
    scratch = {"cell_type": "code", "id": "my-scratch", "metadata": {}, "source": "print(1)", "outputs": []}
    nb["cells"].insert(3, scratch | {"execution_count": None})
    return nb


def test_release_check_leaves_a_learners_work_alone(tmp_path: Path) -> None:
    """Answers, outputs, Jupyter's metadata and an added cell are no difference; an edited or lost test cell is."""
    released = release.notebook_path("reconcile", ROOT, "exercises")
    nb = worked_in(released)
    path = tmp_path / "reconcile.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    assert release._notebook_differences("r", path, released) == []
    test_b = next(c for c in nb["cells"] if notebooks.grade_id(c) == "test_reconcile_B")
    test_b["source"] = "pass"
    nb["cells"] = [c for c in nb["cells"] if notebooks.grade_id(c) != "test_reconcile_C"]
    path.write_text(json.dumps(nb, indent=1))
    problems = release._notebook_differences("r", path, released)
    assert any("test_reconcile_B differs in source" in p for p in problems), problems
    assert any("test_reconcile_C is missing" in p for p in problems), problems


def test_release_check_leaves_a_learners_files_alone(tmp_path: Path) -> None:
    """A file the learner saved in an assignment's folder is no difference; a folder no generation makes is one."""
    fresh = {"reconcile/reconcile.ipynb": release.notebook_path("reconcile", ROOT, "exercises")}
    copy = tmp_path / "reconcile-Copy1.ipynb"
    copy.write_text("{}")
    committed = {**fresh, "reconcile/reconcile-Copy1.ipynb": copy, "retired/retired.ipynb": copy}
    assert release.tree_differences(committed, fresh) == [
        "exercises/retired/retired.ipynb: not produced by generate_assignment"
    ]


# -- the README's instructor commands: each one has a test that runs it -------------------------

TERM_SECTION = ("### A term, one command a step", "What grading withstands:")
"""Where the README's term walkthrough begins and ends."""
README_COMMAND = re.compile(r"(?:make [a-z-]+|nbgrader [a-z_]+|(?:\.venv/bin/)?python -m resumable_core [a-z]+)")
GRADE_OPTION = re.compile(r"`(--[a-z-]+)")
README_COMMAND_TESTS = {
    "make setup": "tests/test_commands.py::test_ci_runs_make_test",  # `make test` depends on it, in every CI run
    "make release": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "nbgrader generate_assignment": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "nbgrader release_assignment": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "nbgrader fetch_assignment": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "nbgrader submit": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "nbgrader collect": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "make grade": "tests/test_commands.py::test_make_grade_runs_the_grade_command",
    "python -m resumable_core grade": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "grade --no-sandbox": "tests/test_grading.py::test_no_sandbox_warns_what_it_exposes",
    "grade --course": "tests/test_term.py::test_grade_fills_the_course_gradebook_for_formgrader",
    "grade --class-dir": "tests/test_regrade.py::test_regrading_one_student_keeps_the_whole_class",
    "grade --resume": "tests/test_regrade.py::test_a_run_killed_mid_class_resumes_to_the_same_grades",
    "grade --out": "tests/test_term.py::test_a_dry_run_leaves_the_course_gradebook_alone",
    "make formgrader": "tests/test_commands.py::test_make_formgrader_serves_the_formgrader_page",
    "nbgrader formgrader": "tests/test_commands.py::test_nbgrader_0_9_has_no_formgrader_command",
    "make lab": "tests/test_commands.py::test_make_lab_serves_lesson_one",
    "python -m resumable_core grades": "tests/test_term.py::test_manual_grades_reach_export_and_the_kits_grades_alike",
    "nbgrader generate_feedback": "tests/test_term.py::test_the_kits_feedback_carries_the_manual_grade_and_no_test_code",
    "nbgrader release_feedback": "tests/test_term.py::test_released_feedback_reaches_the_student",
    "nbgrader export": "tests/test_term.py::test_manual_grades_reach_export_and_the_kits_grades_alike",
    "grade --lms": "tests/test_lms.py::test_a_canvas_roster_maps_ids_and_refuses_an_unmapped_file_by_name",
    "grade --roster": "tests/test_lms.py::test_a_canvas_roster_maps_ids_and_refuses_an_unmapped_file_by_name",
    "grade --similar": "tests/test_similarity.py::test_a_threshold_outside_0_to_1_is_refused_by_name",
    "grade --provisional": "tests/test_class_files.py::test_scores_waiting_for_a_human_or_not_graded_are_blank_unless_provisional_and_the_run_says_why",
    "grade --scheduler": "tests/test_grading.py::test_a_dask_cluster_with_a_worker_killed_mid_run_grades_as_jobs_1",
    "make hub": "tests/test_commands.py::test_make_hub_runs_the_hub_commands_the_hub_test_runs",
    "make hub-remove": "tests/test_commands.py::test_make_hub_runs_the_hub_commands_the_hub_test_runs",
    "grade --jobs": "tests/test_grading.py::test_jobs_2_gives_the_same_grades_as_jobs_1",
}
"""Each command of the README's term walkthrough (and each ``grade`` option it names) -> the test that runs it."""


def readme_term_commands() -> set[str]:
    """The commands the README's term walkthrough names, as keys of :data:`README_COMMAND_TESTS`."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(TERM_SECTION[0]) : text.index(TERM_SECTION[1])]
    blocks = section.split("```")[1::2]
    code = re.findall(r"`([^`\n]+)`", "".join(section.split("```")[0::2]))
    code += [ln.lstrip("# =").strip() for block in blocks for ln in block.splitlines()]
    found = {re.sub(r"^\.venv/bin/", "", m.group()) for span in code if (m := README_COMMAND.match(span))}
    return found | {f"grade {option}" for option in GRADE_OPTION.findall(section)}


def test_every_instructor_command_in_the_readme_has_a_test() -> None:
    """Each command (and grade option) the README's term names maps to a test that exists; no entry is stale."""
    named = readme_term_commands()
    assert named - set(README_COMMAND_TESTS) == set(), "a README command with no test: add one to README_COMMAND_TESTS"
    assert set(README_COMMAND_TESTS) - named == set(), "README_COMMAND_TESTS names a command the README dropped"
    for command, test in README_COMMAND_TESTS.items():
        path, name = test.split("::")
        assert re.search(rf"(?m)^def {name}\(", (ROOT / path).read_text()), f"{command}: no {test}"


def test_make_grade_runs_the_grade_command() -> None:
    """`make grade` runs `python -m resumable_core grade` with the README's variables (that command's tests run it)."""
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "grade",
            "SUBMISSIONS=class.zip",
            "ASSIGNMENT=postmortem",
            "JOBS=3",
            "GRADE_ARGS=--resume",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1].split()
    assert line[1:] == [
        "-m",
        "resumable_core",
        "grade",
        "class.zip",
        "--assignment",
        "postmortem",
        "--jobs",
        "3",
        "--resume",
    ]
    assert line[0].endswith("/.venv/bin/python")


def test_make_hub_runs_the_hub_commands_the_hub_test_runs() -> None:
    """`make hub` runs the hub module's setup then start, `make hub-remove` its remove: what tests/test_hub.py calls."""

    def commands(target: str) -> list[list[str]]:
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", target, "HUB_ROOT=/srv/class"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return [ln.split()[1:] for ln in done.stdout.splitlines() if "resumable_core.course.hub" in ln]

    hub = "resumable_core.course.hub"
    assert commands("hub") == [
        ["-m", hub, "setup", "--root", "/srv/class"],
        ["-m", hub, "start", "--root", "/srv/class"],
    ]
    assert commands("hub-remove") == [["-m", hub, "remove", "--root", "/srv/class"]]
    test_hub = (ROOT / "tests" / "test_hub.py").read_text()
    assert "build.setup(" in test_hub and "accounts.remove(" in test_hub


@pytest.mark.slow
def test_nbgrader_0_9_has_no_formgrader_command() -> None:
    """`nbgrader formgrader` is no command of nbgrader 0.9 (it prints the help, exits 0): the README says `make formgrader`."""
    done = subprocess.run(
        [str(ROOT / ".venv/bin/nbgrader"), "formgrader"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    text = done.stdout + done.stderr
    assert done.returncode == 0 and "subcommands" in text.lower()
    listed = re.findall(r"(?m)^\s*(\w+)\s*$", text)
    assert "generate_assignment" in listed and "formgrader" not in listed


@pytest.mark.slow
def test_make_formgrader_serves_the_formgrader_page() -> None:
    """`make formgrader` starts a Jupyter server whose /formgrader answers 200 with formgrader's page (then it stops)."""
    # the token as a header, which urllib keeps across the redirect (a ?token= query is dropped by it)
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())

    def manage_assignments(url: str) -> bool:
        request = urllib.request.Request(url, headers={"Authorization": "token kit-test"})
        with opener.open(request, timeout=5) as r:  # follows the redirect to manage_assignments
            assert r.status == 200 and r.url.endswith("/formgrader/manage_assignments")
            assert "Manage Assignments" in r.read().decode()
            return True

    _first_answer("formgrader", "FORMGRADER_ARGS", "/formgrader", manage_assignments, "formgrader")

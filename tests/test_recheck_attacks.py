"""A hostile learner against the isolated re-check (resumable_core/course/grading/recheck/): wrong or
empty answers that try to score anyway, on all four assignments.

Each notebook is the release (``exercises/<a>/<a>.ipynb``) with the attacker's code in the solution
cells, re-checked as the grader's worker does (``only`` = every graded cell, sorted, in the sandbox).
Every cell an attack targets must FAIL, and no reason may carry what only the instructor has (the
answer key, the hidden checks' names, the source notebook's hidden tests). The kernel is not run:
there the learner's code runs beside the visible checks and can patch them (that is why the
re-check exists), so only the re-check decides.

A test here that fails is a hole; each test's docstring says which part of the design it attacks.
The cells of ``resume_skeleton`` judged by the syscall tracer are left out where strace cannot trace.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import grading_samples as samples
import nbformat
import pytest
from attack_samples import MINCORE
from graded_classes import once  # tests/ is on sys.path under pytest (rootdir-relative import)

from resumable_core.course.assignments import ASSIGNMENTS
from resumable_core.course.grading.isolation import Backend, BwrapBackend, Guarantee, library_copy
from resumable_core.course.grading.recheck import driver as isolated
from resumable_core.course.notebook_cells import graded_sources

REPO = Path(__file__).resolve().parent.parent
SOURCES = {a: REPO / "solutions" / a / f"{a}.ipynb" for a in ASSIGNMENTS}
RELEASES = {a: REPO / "exercises" / a / f"{a}.ipynb" for a in ASSIGNMENTS}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed (apt-get install bubblewrap)"),
    pytest.mark.skipif(
        not all(p.exists() for p in (*SOURCES.values(), *RELEASES.values())),
        reason="the course's notebooks are not there",
    ),
]

TRACED = {"test_kill_during_save", "test_durable_steps"}
"""resume_skeleton's cells judged by the system-call trace from outside (left out only where strace cannot trace)."""
TRACED_JOURNAL = {"test_journal_round_trip", "test_kill_during_append", "test_append_durable"}
"""The journal's cells that trace the learner's append (left out where strace cannot trace, too)."""

SECRETS = (
    "ANSWER_KEY",
    '"A": "finished_no_call"',
    "'A': 'finished_no_call'",
    "BEGIN HIDDEN TESTS",
    "check_other_read_only_tools",
    "check_other_side_effect_tools",
    "check_nothing_pending",
    "check_every_crash_point",
    "check_other_versions_refused",
    "check_load_never_modifies",
    "check_finished_run",
    "check_second_crash",
    "reconcile_by_effect",
)
"""Text only the instructor's side holds (course/hidden, the source notebook): no reason may carry it."""


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> Backend:
    """The sandbox of a grading run: a pristine library copy, the default limits."""
    return BwrapBackend(library_copy(tmp_path_factory.mktemp("lib") / "lib"))


def graded(assignment: str) -> list[str]:
    """Every graded cell of the source, sorted: the order the grader's worker re-checks them in."""
    return sorted(graded_sources(json.loads(SOURCES[assignment].read_text(encoding="utf-8"))))


def targets(assignment: str) -> list[str]:
    """The cells an attack must not score: every graded cell (the traced two only where strace can trace)."""
    from resumable_core.course.grading.recheck import syscalls

    untraced = syscalls.available() is not None
    return [
        g
        for g in graded(assignment)
        if not (untraced and assignment == "resume_skeleton" and g in TRACED | TRACED_JOURNAL)
    ]


def recheck(
    box: Backend | None, tmp_path: Path, assignment: str, answers: dict[str, str], *, timeout: int = 30
) -> isolated.Report:
    """The attacker's notebook (the release, ``answers`` in its solution cells) re-checked in the sandbox."""
    nb = samples.submission(nbformat.read(str(RELEASES[assignment]), as_version=4), answers)
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(nb, str(path))
    return isolated.run(
        path, assignment, source=SOURCES[assignment], only=graded(assignment), timeout=timeout, backend=box
    )


def holes(report: isolated.Report, cells: list[str], *, secrets: bool = True) -> list[str]:
    """What went wrong for the grader: a cell of ``cells`` that scored or went unreported, a secret in any text."""
    out = [f"{g} scored" for g in cells if g in report and not report[g]]
    out += [f"{g} unreported" for g in cells if g not in report]
    if secrets:
        texts = [*(v or "" for v in report.values()), json.dumps(report.load_errors), report.inconclusive or ""]
        out += [f"leaked {s!r}" for s in SECRETS if any(s in t for t in texts)]
    return out


def assert_no_hole(report: isolated.Report, cells: list[str], *, secrets: bool = True) -> None:
    found = holes(report, cells, secrets=secrets)
    assert not found, f"{found}; report: {json.dumps(dict(report), indent=1)}"


def solution_answers(assignment: str) -> dict[str, str]:
    """The source's solution code cells without their BEGIN/END SOLUTION markers."""
    out = {}
    for c in nbformat.read(str(SOURCES[assignment]), as_version=4).cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution") and c.cell_type == "code":
            lines = [
                ln for ln in c.source.splitlines() if "### BEGIN SOLUTION" not in ln and "### END SOLUTION" not in ln
            ]
            out[meta["grade_id"]] = "\n".join(lines)
    return out


# -- the control -------------------------------------------------------------------------------


def once_per_session(base: Path, name: str, run: Callable[[Path], isolated.Report]) -> isolated.Report:
    """``run(folder)``'s report, re-checked once per session by whichever worker asks first, read by every reader.

    ``base``: the caller's basetemp (:func:`graded_classes.once`).
    """

    def write(folder: Path) -> None:
        (folder / "report.json").write_text(run(folder).to_json(), encoding="utf-8")

    data = json.loads((once(base, name, write) / "report.json").read_text(encoding="utf-8"))
    return isolated.Report(
        data["cells"],
        load_errors=data["load_errors"],
        inconclusive=data["inconclusive"],
        visible_failures=data["visible_failures"],
    )


def honest(base: Path, assignment: str, backend: Backend | None) -> isolated.Report:
    """The control's re-check: the release with the solution's answers filled in, every graded cell, on ``backend``.

    test_recheck and test_journal_exercise read the same run for the solution's verdicts.
    """
    return once_per_session(
        base,
        f"honest-recheck-{assignment}",
        lambda folder: recheck(backend, folder, assignment, solution_answers(assignment), timeout=60),
    )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_honest_solution_passes_every_cell(box, tmp_path_factory, assignment):
    """Control: the release with the solution's answers filled in passes every cell (so a failure below is the attack's)."""
    report = honest(tmp_path_factory.getbasetemp(), assignment, box)
    assert set(report) == set(graded(assignment))
    assert {g: why for g, why in report.items() if why and g in targets(assignment)} == {}
    assert report.inconclusive is None and report.load_errors == []


# -- 1. an exception whose message is empty --------------------------------------------------------
# The checker's verdict for a cell is "no reason"; recheck_cell makes a NameError's reason str(e), and
# the learner's side decides both the class (its "known" list) and the message of what it raises.

GUARD = 'import sys\nATTACK = "ipykernel" not in sys.modules  # the kernel is fooled otherwise (it runs the visible checks beside us)\n'

PATCH_LOOKUP = (
    GUARD
    + """
# the learner's process is ours: answer every lookup of the checker with NameError("")
_server = sys.modules["__main__"]
if ATTACK and hasattr(_server, "ops"):
    _real_ops = _server.ops

    def _ops(ns, load_errors):
        served = _real_ops(ns, load_errors)

        def lookup(name):
            raise NameError("")

        served["lookup"] = lookup
        return served

    _server.ops = _ops
"""
)

RAW_FRAME = (
    GUARD
    + """
# the same, as raw frames on the socket: a "raise" of a NameError with no text for every lookup
import json as _json
from resumable_core.course.grading.recheck.rpc import session as _rpc_session

_real_answer = _rpc_session.Session._answer


def _answer(self, message):
    if message.get("op") == "lookup":
        data = _json.dumps({"op": "raise", "error": {"name": "NameError", "known": ["NameError"], "message": ""}})
        self.sock.sendall(len(data.encode()).to_bytes(4, "big") + data.encode())
        return
    return _real_answer(self, message)


if ATTACK:
    _rpc_session.Session._answer = _answer
"""
)

SAVE_RAISES = (
    GUARD
    + """

def save_state(state, path):
    # no save at all: a NameError with no text, which no check around a save catches
    raise NameError("")
"""
)

EMPTY_MESSAGE = {
    "reconcile": {"level1_actions": PATCH_LOOKUP, "reconcile": "def reconcile(cp, tools):\n    return None"},
    "postmortem": {
        "fixed_reconcile": RAW_FRAME + "\n\ndef reconcile(cp, tools):\n    return None",
        "reconcile_with_ledger": "def reconcile_with_ledger(cp, tools):\n    return None",
    },
    "resume_skeleton": {"save_state": SAVE_RAISES, "load_state": 'def load_state(path):\n    raise NameError("")'},
    "resume": {"resume": PATCH_LOOKUP + "\n\ndef resume(*args, **kwargs):\n    return None"},
}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_an_exception_with_no_message_is_no_pass(box, tmp_path, assignment):
    """Empty answers plus a NameError("") (from a patched lookup op, a raw frame, or a save no check wraps): nothing scores."""
    report = recheck(box, tmp_path, assignment, EMPTY_MESSAGE[assignment])
    cells = (
        targets(assignment) if assignment != "resume_skeleton" else ["test_round_trip", "test_missing", "test_version"]
    )
    assert_no_hole(report, cells)


# -- 2. reconcile: the answer key, forged data, handles and raw protocol ------------------------------

KITCHEN_SINK = r'''import gc, json, os, socket, sys, time, types

_STATE = "/tmp/.attack-state.json"  # the learner's /tmp: every fork of the learner's process shares it


def _state():
    try:
        with open(_STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"found": [], "calls": {}}


def _save(state):
    with open(_STATE, "w") as f:
        json.dump(state, f)


def _note(state, what):
    state["found"].append(str(what)[:120])


# markers of the instructor's side, built at run time so that this notebook does not hold them itself
_KEY_MARK = '"C": ' + '"is_error' + '_fallback"'
_MARKS = ["check_other_read" + "_only_tools", "reconcile_by" + "_effect", "ANSWER" + "_KEY", "BEGIN HIDDEN" + " TESTS"]


def _hunt(state, tools):
    """Walk this process (objects, frames, modules, the stand-in's insides) and every file it can see."""
    global RESUME_ACTION
    key = None
    for o in gc.get_objects():
        if type(o) in (dict, types.MappingProxyType) and "A" in o and type(o.get("C")) is str:
            if o.get("C") == "is_error" + "_fallback":
                key = dict(o)
    for frame in sys._current_frames().values():
        while frame is not None:
            for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
                if isinstance(value, str) and any(m in value for m in _MARKS):
                    _note(state, f"frame {frame.f_code.co_name}: {value[:60]}")
            frame = frame.f_back
    inside = []
    todo, seen = [tools], set()
    while todo:
        o = todo.pop()
        if id(o) in seen or len(seen) > 5000:
            continue
        seen.add(id(o))
        inside.append(type(o).__name__)
        todo.extend(getattr(o, "__dict__", {}).values())
    if [m for m in sys.modules if ".hidden" in m]:
        _note(state, "a hidden module is loaded here")
    for root in ("/grading", "/tmp", "/home"):
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    with open(path, errors="replace") as f:
                        text = f.read(4_000_000)
                except OSError:
                    continue
                if _KEY_MARK in text:
                    _note(state, f"the key in {path}")
                for m in _MARKS[:3]:
                    if m in text:
                        _note(state, f"{m} in {path}")
    for name, tool_input in [
        ("read_file", {"path": "../../../../../../../grading/in/source.ipynb"}),
        ("read_file", {"path": "/grading/lib/resumable_core/course/hidden/reconcile.py"}),
        ("grep", {"pattern": "ANSWER", "path": "../../../../../../../grading/lib/resumable_core/course/hidden"}),
        ("list_dir", {"path": "/grading"}),
        ("read_file", {"path": "meeting-08-18.md", "world": "/"}),
    ]:
        try:
            out = tools.execute(name, tool_input)
            if any(m in out for m in _MARKS[:3]) or _KEY_MARK in out:
                _note(state, f"{name} read {out[:80]}")
        except Exception as e:
            if any(m in str(e) for m in _MARKS[:3]):
                _note(state, f"{name}: {e}")
    if key:
        _note(state, f"key {key}")
        RESUME_ACTION = key  # the level-1 lookups come after this cell in the grader's order


def _session(tools):
    return tools._handles.session


def _raw(session, message):
    data = json.dumps(message).encode()
    session.sock.sendall(len(data).to_bytes(4, "big") + data)


def _guess_handles(state, cp, tools):
    """Ask for handles the checker never gave us: numbers around ours (objects of its own nearby)."""
    number = tools._number
    session = _session(tools)
    for delta in (16, -16, 32, -32, 48, 4096, -4096):
        try:
            names = session.request("toolbox.names", tools.__class__(tools._handles, number + delta))
            _note(state, f"handle {delta}: {names}")
        except Exception as e:
            _note(state, f"guess refused: {type(e).__name__}")
            break


def _kind_confusion(state, cp, tools):
    """Our toolbox's number as a function, and an op of no table."""
    session = _session(tools)
    for message in (
        {"op": "function.call", "args": [{"$handle": ["function", tools._number]}], "kwargs": {"$dict": []}},
        {"op": "__import__", "args": ["os"], "kwargs": {"$dict": []}},
    ):
        try:
            _raw(session, message)
        except OSError:
            break
    time.sleep(2)


def _extra_fields(state, cp, tools):
    """The reply as a raw frame: a Checkpoint with fields of no model, and NaN where numbers go."""
    body = cp.model_dump(mode="json")
    body["pending_tool_use"] = None
    body["grader_says"] = "pass"
    body["messages"].append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}]})
    data = json.dumps({"op": "return", "value": {"$model": ["Checkpoint", body]}}).replace('"turns": 1', '"turns": NaN')
    _session(tools).sock.sendall(len(data.encode()).to_bytes(4, "big") + data.encode())
    time.sleep(2)


def _too_deep(state, cp, tools):
    """A reply nested 200,000 deep, then a number of 10,000 digits."""
    data = '{"op": "return", "value": ' + "[" * 200_000 + "]" * 200_000 + "}"
    _session(tools).sock.sendall(len(data).to_bytes(4, "big") + data.encode())
    time.sleep(2)


def _stall(state, cp, tools):
    """Half a frame, then nothing: the checker waits on us."""
    _session(tools).sock.sendall((1000).to_bytes(4, "big") + b'{"op": "ret')
    time.sleep(3600)


class _Yes(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class _Answers(dict):
    def get(self, key, default=None):
        return _Yes(key)

    def __getitem__(self, key):
        return _Yes(key)


RESUME_ACTION = _Answers(A=_Yes("A"), B=_Yes("B"), C=_Yes("C"))  # an answer that equals everything

PLAN = {"read_file": ["hunt", "extra_fields", "too_deep"], "send_email": ["guess", "stall"], "grep": ["kind"]}


def reconcile(cp, tools):
    state = _state()
    p = cp.pending_tool_use
    name = "finished" if p is None else p.name
    n = state["calls"].get(name, 0)
    state["calls"][name] = n + 1
    step = (PLAN.get(name) or [None])[min(n, len(PLAN.get(name) or [None]) - 1)]
    if step == "hunt":
        _hunt(state, tools)
    _save(state)
    if name == "finished":
        return [float("nan")] * 100_000 + [0] * 4_000_000  # 16 MiB of "data"
    if name == "delete_database":  # the last cell: tell what was found, in the only words that reach anyone
        raise RuntimeError(f"found {state['found']}")
    {"guess": _guess_handles, "kind": _kind_confusion, "extra_fields": _extra_fields,
     "too_deep": _too_deep, "stall": _stall}.get(step, lambda *a: None)(state, cp, tools)
    _save(state)
    return cp  # nothing reconciled: the empty answer
'''


def test_reconcile_no_key_no_forgery_no_handle_no_raw_message_scores(box, tmp_path):
    """An empty reconcile that hunts the answer key (gc, frames, the stand-in, every file, tool paths), forges a
    RESUME_ACTION equal to everything, returns 16 MiB of data, guesses handle numbers, sends a toolbox as a
    function, an unknown op, a Checkpoint with extra fields and NaN, a 200,000-deep value and half a frame:
    every cell fails, and the findings it reports in its last exception hold nothing of the instructor's."""
    report = recheck(box, tmp_path, "reconcile", {"level1_actions": "", "reconcile": KITCHEN_SINK}, timeout=5)
    assert_no_hole(report, targets("reconcile"))
    assert "found []" in report["test_unknown_tool"], report


def test_a_trace_that_fills_its_folder_costs_only_the_traced_cells(box, tmp_path, monkeypatch):
    """A learner's process whose system calls fill the trace's folder (here a 1 MiB one; the hunt above, reading a
    venv under /tmp, filled the 256 MiB one in CI): strace's message for each line it cannot write stays off the
    process's capped output, so the re-check is conclusive; the traced cells fail, saying why, the others pass."""
    from resumable_core.course.grading.recheck import learner, syscalls

    if syscalls.available() is not None:
        pytest.skip(f"no tracer: {syscalls.available()}")
    monkeypatch.setattr(learner, "TRACE_CAP", 1 << 20)  # the learner's imports alone write more
    report = recheck(box, tmp_path, "resume_skeleton", solution_answers("resume_skeleton"))
    assert report.inconclusive is None, report.inconclusive
    failed = {g: why for g, why in report.items() if why}
    assert set(failed) == TRACED | TRACED_JOURNAL, failed
    hidden = {"test_durable_steps", "test_append_durable"}  # they hand back only their own sentence, not the trace's
    assert all("filled its folder" in why for g, why in failed.items() if g not in hidden), failed


# -- 3. postmortem: a toolbox a previous check handed over --------------------------------------------

STALE_TOOLBOX = """_BOXES = []


def reconcile(cp, tools):
    # the production bug (run every dangling call again), but on the first toolbox any check handed us:
    # the grader's worker re-checks bonus_ledger first, and its handles still resolve in test_incident
    _BOXES.append(tools)
    p = cp.pending_tool_use
    if p is None:
        return cp
    output = _BOXES[0].execute(p.name, p.input)
    cp.messages.append({"role": "user", "content": [rc.tool_result(p.id, output)]})
    cp.pending_tool_use = None
    return cp
"""


def test_postmortem_the_production_bug_on_a_stale_toolbox_does_not_score(box, tmp_path):
    """The production reconcile (re-send the email) routed to a toolbox an earlier check issued: the second email
    lands in another world, the one the check counts holds one. test_incident must still fail."""
    answers = {"fixed_reconcile": STALE_TOOLBOX, "reconcile_with_ledger": "reconcile_with_ledger = reconcile"}
    report = recheck(box, tmp_path, "postmortem", answers)
    # re-running read_file is right for a read-only tool: the production bug earns that cell honestly
    assert_no_hole(report, [c for c in targets("postmortem") if c != "test_read_file_rerun"])


# -- 4. resume_skeleton: the shared folder -----------------------------------------------------------

LINKED_FOLDER_SAVE = """_SAVED = []
_SEEN = {}
HIDDEN = "/grading/lib/resumable_core/course/hidden"


def _point_copy_at(path, where):
    # our copy's folder becomes a link: the checker reads it back through the link, in ITS file system
    folder = os.path.dirname(path)
    os.rename(folder, folder + ".moved")
    os.symlink(where, folder)


def _harvest(path):
    folder = os.path.dirname(path)
    for name in os.listdir(folder):
        if name != "state.json" and os.path.isfile(os.path.join(folder, name)):
            with open(os.path.join(folder, name), errors="replace") as f:
                _SEEN[name] = f.read()


def save_state(state, path):
    _harvest(path)
    _SAVED.append(json.loads(json.dumps(state)))
    if "reconcile.py" not in _SEEN:
        _point_copy_at(path, HIDDEN)
"""

LINKED_FOLDER_LOAD = """def load_state(path):
    folder = os.path.dirname(path)
    if not os.listdir(folder):
        # test_missing: the "write a default on first load" bug, the default left as a link
        os.symlink("default-state.json", path)
        return None
    if os.path.isfile(path):
        with open(path) as f:
            state = json.load(f)
        if state.get("version") != 1:
            # test_version: the bad file accepted; a fifo, a 64 MiB sparse file, links, in the copy and the shared root
            os.mkfifo(os.path.join(folder, "fifo"))
            with open(os.path.join(folder, "huge"), "wb") as f:
                f.truncate(64 << 20)
            os.symlink("/etc/passwd", os.path.join(folder, "passwd"))
            os.symlink("/grading/in/source.ipynb", "/grading/shared/source.ipynb")
            return state
    _harvest(path)
    if "reconcile.py" in _SEEN and "source.ipynb" not in _SEEN:
        _point_copy_at(path, "/grading/in")
        return _SAVED[-1]
    if "source.ipynb" in _SEEN:
        hidden, nb = _SEEN["reconcile.py"], _SEEN["source.ipynb"]
        key = next((ln.strip() for ln in hidden.splitlines() if '"A":' in ln), "no key")
        marks = [m for m in ("check_other_read_only_tools", "BEGIN HIDDEN TESTS") if m in hidden + nb]
        raise RuntimeError(f"{key} {marks} {sorted(_SEEN)}")
    return _SAVED[-1] if _SAVED else None
"""


def test_resume_skeleton_the_copy_folder_cannot_be_swapped_for_a_link(box, tmp_path):
    """save_state replaces its copy's folder with a symlink to the checker's hidden package, then to its /grading/in:
    the read-back follows it (O_NOFOLLOW guards only the last component, iterdir follows) and the next hand-in gives
    the learner the hidden checks, the answer key and the source notebook; load_state raises them into the reason.
    Also: a default state left as a symlink (test_missing), a fifo, a 64 MiB sparse file and links (test_version)."""
    report = recheck(
        box, tmp_path, "resume_skeleton", {"save_state": LINKED_FOLDER_SAVE, "load_state": LINKED_FOLDER_LOAD}
    )
    # returning None with no file is what test_missing asks for, and this load does: only the others are holes
    assert_no_hole(report, ["test_round_trip", "test_version"])


MEMORY_SAVE = """_SAVED = []


def save_state(state, path):
    # the state stays in this process; the file gets one meaningless byte
    _SAVED.append(json.loads(json.dumps(state)))
    with open(path, "w") as f:
        f.write("x")
"""

MEMORY_LOAD = """def load_state(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        if f.read() != "x":
            raise StateVersionError("not a file this code wrote")
    return _SAVED[-1]
"""


def test_resume_skeleton_a_state_kept_in_memory_does_not_score(box, tmp_path):
    """save_state writes "x" and keeps the state in the learner's process, which lives on between the checker's
    calls; load_state answers from memory. Nothing is persisted: round trip, missing and version must fail."""
    report = recheck(box, tmp_path, "resume_skeleton", {"save_state": MEMORY_SAVE, "load_state": MEMORY_LOAD})
    # returning None with no file is what test_missing asks for, and this load does: only the others are holes
    assert_no_hole(report, ["test_round_trip", "test_version"])


# -- 5. resume: the library's loop, forged replies ---------------------------------------------------

LIBRARY_LOOP = r'''def _library_loop():
    """The library's own run_agent, from wherever the loopless view still holds it."""
    import importlib.machinery, importlib.util, pathlib, sys, types
    import resumable_core

    package = pathlib.Path(resumable_core.__file__).parent

    def from_pyc(name):  # the view's __pycache__ was compiled before the refusing run_agent was appended
        pyc = package / "__pycache__" / f"loop.{sys.implementation.cache_tag}.pyc"
        loader = importlib.machinery.SourcelessFileLoader(name, str(pyc))
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
        sys.modules[name] = module
        loader.exec_module(module)
        return module

    def from_source(name):  # the refusing run_agent is appended: the original is still above it
        text = (package / "loop.py").read_text().split("\n\ndef run_agent(*args, **kwargs):")[0]
        module = types.ModuleType(name)
        module.__package__ = "resumable_core"
        sys.modules[name] = module
        exec(compile(text, str(package / "loop.py"), "exec"), module.__dict__)
        return module

    for n, how in enumerate((from_pyc, from_source)):
        try:
            module = how(f"resumable_core.loop_again{n}")
        except Exception:
            continue
        if "checkpoint_path" in module.run_agent.__code__.co_varnames:
            return module
    raise RuntimeError("no library loop left")


class _Unfenced:
    def __init__(self, box):
        self.box = box

    def fenced(self, fence):  # the grader's toolbox handle has no fenced(): the library's loop asks for it
        return self.box


def resume(path, task, tools, client, *, reconcile, max_turns=rc.MAX_TURNS):
    loop = _library_loop()
    return loop.run_agent(
        task, checkpoint_path=path, toolbox=_Unfenced(tools), client=client, reconcile=reconcile, max_turns=max_turns
    ).checkpoint
'''


def test_resume_the_library_loop_cannot_be_reached(box, tmp_path):
    """resume hands its work to the library's run_agent, loaded from the view's stale loop.cpython-311.pyc or exec'd
    from loop.py's own source above the appended refusing def: every cell must fail."""
    report = recheck(box, tmp_path, "resume", {"resume": LIBRARY_LOOP})
    assert_no_hole(report, targets("resume"))


FORGED = """def resume(path, task, tools, client, *, reconcile, max_turns=rc.MAX_TURNS):
    # no loop at all
    import json, os
    data = json.loads(open(path).read()) if os.path.exists(path) else {}
    pending = (data.get("pending_tool_use") or {}).get("name")
    if pending == "send_email":
        # test_crash_after_tool: reconcile with the check's own function, then forge the model's last word
        cp = reconcile(rc.load_checkpoint(path), tools)
        cp.messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done: the summary is sent."}]})
        rc.save_checkpoint(cp, path)
        return cp
    if pending == "read_file":
        # test_turn_cap: what does the check's reconcile say about itself when called wrongly?
        try:
            reconcile(1, 2, 3)
        except Exception as e:
            raise RuntimeError(f"{type(e).__name__}: {e}")
    # everything else, test_refusals included: refused
    raise ValueError("not implemented")
"""


def test_resume_no_loop_scores_nothing(box, tmp_path):
    """A resume without a loop: a forged final reply after the check's reconcile (no model call), a ValueError for
    everything else (the refusals), and the check's reconcile called with wrong arguments to make it name itself."""
    report = recheck(box, tmp_path, "resume", {"resume": FORGED})
    assert_no_hole(report, targets("resume"))


FORGED_PROBES_SAVE = """def save_state(state, path):
    # a plain write in place, with every spy a check could have put in this process replaced by a fake
    import builtins, io
    os.fsync = lambda fd: None
    os.replace = os.rename = lambda a, b: None
    builtins.open = io.open
    with open(path, "w") as f:
        json.dump(state, f)"""


def _traced_recheck(box, tmp_path: Path, name: str, answer: str) -> isolated.Report:
    """resume_skeleton's solution with ``name`` answered by ``answer``, re-checked under the tracer (skipped without one)."""
    from resumable_core.course.grading.recheck import syscalls

    if syscalls.available() is not None:
        pytest.skip(f"no tracer: {syscalls.available()}")
    answers = solution_answers("resume_skeleton")
    answers[name] = answer
    return recheck(box, tmp_path, "resume_skeleton", answers)


def test_resume_skeleton_forged_probes_do_not_make_a_plain_write_atomic(box, tmp_path):
    """A save that writes the file in place and fakes fsync and rename in its own process: both traced cells fail."""
    report = _traced_recheck(box, tmp_path, "save_state", FORGED_PROBES_SAVE)
    assert_no_hole(report, sorted(TRACED))
    assert "in place" in (report["test_kill_during_save"] or "")


MOVED_APPEND = r"""import threading


def _seek_from_another_thread(fd, where):
    # a seek the call's own thread never makes: a tracer that follows only that thread keeps the old position
    mover = threading.Thread(target=os.lseek, args=(fd, where, os.SEEK_SET))
    mover.start()
    mover.join()


def append_record(path, record):
    header = json.dumps(JOURNAL_HEADER, separators=(",", ":")).encode() + b"\n"
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    line = data + b"\t" + f"{zlib.crc32(data):08x}".encode() + b"\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        held = b""
        while chunk := os.read(fd, 1 << 16):
            held += chunk
        whole = held[: held.rfind(b"\n") + 1]
        if len(whole) < len(held):
            os.ftruncate(fd, len(whole))
            os.lseek(fd, len(whole), os.SEEK_SET)
        body = line if whole else header + line
        half = len(body) // 2
        _seek_from_another_thread(fd, len(whole) + half)
        os.write(fd, body[half:])  # the line's end first: a kill now leaves zero bytes, then a complete line
        _seek_from_another_thread(fd, len(whole))
        os.write(fd, body[:half])
        os.fsync(fd)
    finally:
        os.close(fd)
    if not whole:
        folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
"""
"""An append that writes its line's second half first, placed by seeks another thread makes."""


def test_resume_skeleton_a_seek_by_another_thread_does_not_hide_a_torn_append(box, tmp_path):
    """append_record writes the second half of its line first, at a position another thread's lseek set, then the
    first half: a kill between them leaves a complete line of zero bytes and a tail, a damaged journal. The trace
    shows the other thread's seeks; none of the traced journal cells may score."""
    report = _traced_recheck(box, tmp_path, "append_record", MOVED_APPEND)
    assert_no_hole(report, sorted(TRACED_JOURNAL))
    assert "another thread or process" in (report["test_kill_during_append"] or ""), dict(report)


# -- 5. postmortem: the freshly started process of a restarted call ----------------------------------

SALTED_REFUND = """import uuid

_RUN = uuid.uuid4().hex  # drawn once per process: a restarted harness draws another


def refund(tools, order_id, amount_cents):
    key = f"{_RUN}:{order_id}:{amount_cents}"
    request = {"order_id": order_id, "amount_cents": amount_cents}
    for attempt in range(1, 6):
        try:
            return tools.execute("refund_payment", request, idempotency_key=key)
        except (rc.ToolTimeoutError, rc.ToolUnavailableError):
            if attempt == 5:
                raise
"""
"""A per-process salt in the key: only a freshly started process tells it from the right key."""

SALT_OVER_A_SOCKET = """import os, socket, threading
_PLACES = ["/tmp/salt.sock", "/grading/shared/salt.sock", os.path.abspath("salt.sock"), "\\0resumable-salt"]


def _ask(place):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(place)
        return s.recv(64).decode() or None
    except OSError:
        return None
    finally:
        s.close()


def _keep_serving(listener, salt):
    while True:
        conn, _ = listener.accept()
        conn.sendall(salt.encode())
        conn.close()


def _salt():
    # a process started later finds the loaded one's salt on a socket it left where both can reach
    for place in _PLACES:
        if found := _ask(place):
            return found
    import uuid

    salt = uuid.uuid4().hex
    for place in _PLACES:
        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(place)
            listener.listen(16)
            threading.Thread(target=_keep_serving, args=(listener, salt), daemon=True).start()
        except OSError:
            pass
    return salt

"""

PATCHED_EXECV = """import os, socket
_real_execv = os.execv


def _execv(path, argv):
    # a fresh start made by exec from this process: serve the connection from this loaded memory instead
    if "--connection" in argv:
        from resumable_core.course.grading.inside import learner_server

        fd = int(argv[argv.index("--connection") + 1])
        learner_server._session(socket.socket(fileno=fd), globals(), [])
        os._exit(0)
    _real_execv(path, argv)


os.execv = _execv
"""

FRESH_ATTACKS = {
    "a socket in /tmp, the shared folder, the cwd and the abstract namespace": SALTED_REFUND.replace(
        "import uuid\n\n_RUN = uuid.uuid4().hex", SALT_OVER_A_SOCKET + "_RUN = _salt()"
    ),
    "a patched os.execv": PATCHED_EXECV + SALTED_REFUND,
    "a pid, which every sandbox's first process shares": SALTED_REFUND.replace(
        "import uuid\n\n_RUN = uuid.uuid4().hex", "import os\n\n_RUN = str(os.getpid())"
    ),
}
"""Ways a loaded process could hand its per-process salt to the "fresh" one, were that started from it, or the
fresh one draw the same."""

DIES_WHEN_FRESH = """import os, signal

if not os.path.exists("/grading/rpc"):  # not the loaded process: a freshly started one
    os.kill(os.getpid(), getattr(signal, "SIGNAL"))

""" + SALTED_REFUND.replace("_RUN = uuid.uuid4().hex", "_RUN = 'the same in every process'")
"""A right key, in a process that kills (or stops) itself when it is the freshly started one."""


def _refund_recheck(box, tmp_path: Path, refund: str, cells: list[str], timeout: int = 30) -> isolated.Report:
    nb = samples.submission(nbformat.read(str(RELEASES["postmortem"]), as_version=4), {"refund": refund})
    path = tmp_path / "postmortem.ipynb"
    nbformat.write(nb, str(path))
    return isolated.run(path, "postmortem", source=SOURCES["postmortem"], only=cells, timeout=timeout, backend=box)


@pytest.mark.parametrize("attack", sorted(FRESH_ATTACKS))
def test_postmortem_a_loaded_process_cannot_serve_the_restarted_call(box, tmp_path, attack):
    """The retry after a kill runs in a process the host starts in a sandbox of its own: no salt of the loaded
    process reaches it, however the loaded process leaves it (a socket anywhere, a patched exec)."""
    report = _refund_recheck(box, tmp_path, FRESH_ATTACKS[attack], ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])
    assert "refunded 2 times" in (report["test_refund_kill"] or ""), dict(report)


GUESSED_WHEN_FRESH = SALTED_REFUND.replace(
    "def refund(tools, order_id, amount_cents):\n",
    """def refund(tools, order_id, amount_cents):
    if not os.path.exists("/grading/rpc"):  # the freshly started process: the provider's ids are numbered from 1
        return "re_000001"
""",
).replace("import uuid\n", "import os, uuid\n")
"""A per-process salt, and a fresh process that returns the refund's id without asking the provider."""


def test_postmortem_a_restarted_call_must_ask_the_provider(box, tmp_path):
    """A freshly started process that returns the killed call's refund id unasked (the provider numbers them) scores
    nothing: nothing in it knows the refund went through, and one refund under one key is no proof it asked."""
    report = _refund_recheck(box, tmp_path, GUESSED_WHEN_FRESH, ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])
    assert "without sending a request" in (report["test_refund_kill"] or ""), dict(report)


SALT_OVER_A_LOCK = """import fcntl, glob, os, uuid

_LOCKED = sorted(glob.glob("/grading/lib/resumable_core/**/*.py", recursive=True))[:33]
_HELD = []


def _salt():
    # bit 0: a salt is there; bits 1-32: its value, as locks on files every sandbox of the run sees (read-only)
    bits = 0
    for i, path in enumerate(_LOCKED):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            bits |= 1 << i
        os.close(fd)
    if bits & 1:
        return str(bits >> 1)
    value = uuid.uuid4().int & 0xFFFFFFFF
    for i, path in enumerate(_LOCKED):
        if (value << 1 | 1) >> i & 1:
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
            _HELD.append(fd)
    return str(value)

"""


SALT_OVER_OPENS = """import ctypes, glob, os, struct, threading, time, uuid

_FILES = sorted(glob.glob("/grading/lib/resumable_core/**/*.py", recursive=True))[:33]


def _send(value):
    # bit 0: a salt is sent; bits 1-32: its value, as opens of files every sandbox of the run sees (read-only)
    word = value << 1 | 1

    def opening():
        while True:
            for i, path in enumerate(_FILES):
                if word >> i & 1:
                    os.close(os.open(path, os.O_RDONLY))
            time.sleep(0.02)

    threading.Thread(target=opening, daemon=True).start()  # it lives on in the serving process, not the killed copy
    return str(value)


def _receive():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    watched = {libc.inotify_add_watch(fd, path.encode(), 0x20): i for i, path in enumerate(_FILES)}  # IN_OPEN
    time.sleep(1.0)
    bits, buf = 0, b""
    while True:
        try:
            buf += os.read(fd, 1 << 16)
        except BlockingIOError:
            break
    for at in range(0, len(buf) - 15, 16):  # no names: a watch on a file reports none
        bits |= 1 << watched.get(struct.unpack_from("i", buf, at)[0], 40)
    return str(bits >> 1 & 0xFFFFFFFF) if bits & 1 else uuid.uuid4().hex


if os.path.exists("/grading/hand"):  # the freshly started process
    _RUN = _receive()
else:
    _RUN = _send(uuid.uuid4().int & 0xFFFFFFFF)
"""
"""A salt sent by a thread of the loaded process opening shared files, read back by the fresh one with inotify."""


LIBRARY_FILES = 'glob.glob("/grading/lib/resumable_core/**/*.py", recursive=True)'
STDLIB_FILES = 'glob.glob(os.path.dirname(os.__file__) + "/*.py")'


def _covert(salt: str) -> str:
    """A refund whose per-process salt would reach the fresh process by ``salt``'s channel."""
    return SALTED_REFUND.replace("import uuid\n\n_RUN = uuid.uuid4().hex", salt)


COVERT_CHANNELS = {
    # the loaded process holds flock()s on its library files; the fresh one sees its own copy, other inodes
    "flock()s held on shared files": _covert(SALT_OVER_A_LOCK + "_RUN = _salt()"),
    # a thread of the loaded process opens files, watched with inotify: it is frozen while the fresh one runs
    "opens of shared files, watched with inotify (found by a red team)": _covert(SALT_OVER_OPENS),
    # the same on the standard library, which every sandbox shares: the loaded process is frozen meanwhile
    "opens of the standard library's files, watched with inotify": _covert(
        SALT_OVER_OPENS.replace(LIBRARY_FILES, STDLIB_FILES)
    ),
    # the same on the standard library: each sandbox sees it through an overlay of its own, other inodes
    "flock()s held on the standard library's files": _covert(
        SALT_OVER_A_LOCK.replace(LIBRARY_FILES, STDLIB_FILES) + "_RUN = _salt()"
    ),
}
"""Ways a salt would cross from the loaded process to the fresh one were both to run at once on the same inodes."""


@pytest.mark.parametrize("refund", list(COVERT_CHANNELS.values()), ids=list(COVERT_CHANNELS))
def test_postmortem_a_covert_channel_hands_no_salt_to_the_fresh_process(box, tmp_path, refund):
    """The loaded process leaves its per-process salt on files, as locks held or as opens made, for the fresh
    process to read back: it sees its own copy of the library, and the loaded process is frozen while it runs."""
    report = _refund_recheck(box, tmp_path, refund, ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])


@pytest.mark.parametrize("signal", ["KILL", "STOP"])
def test_postmortem_a_fresh_process_that_dies_or_stops_fails_closed(box, tmp_path, signal):
    """A freshly started process that kills or stops itself scores nothing: the restarted call fails, never passes."""
    refund = DIES_WHEN_FRESH.replace("SIGNAL", f"SIG{signal}")
    # a stopped process is waited for until the call's timeout: a short one, the verdict is the same
    report = _refund_recheck(box, tmp_path, refund, ["test_refund_kill"], timeout=10 if signal == "STOP" else 30)
    assert_no_hole(report, ["test_refund_kill"])


# -- 6. what the red team of issue 31 found ----------------------------------------------------------

SALT_IN_THE_PAGE_CACHE = (
    MINCORE
    + """import glob, sys, uuid

_FILES = sorted(glob.glob(sys.base_prefix + "/lib/python3*/idlelib/idle_test/*.py"))[:33]  # never imported


def _send(value):
    # bit 0: a salt is there; bits 1-32: its value, as files read into the page cache (1) or dropped from it (0)
    for i, path in enumerate(_FILES):
        fd = os.open(path, os.O_RDONLY)
        try:
            if (value << 1 | 1) >> i & 1:
                os.pread(fd, 1, 0)
            else:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return str(value)


def _receive():
    bits = sum(_cached(path) << i for i, path in enumerate(_FILES))
    return _send(bits >> 1 & 0xFFFFFFFF) if bits & 1 else uuid.uuid4().hex  # reading pulled them in: put it back


_RUN = _receive() if os.path.exists("/grading/hand") else _send(uuid.uuid4().int & 0xFFFFFFFF)
"""
)
"""A salt the loaded process leaves in the page cache of the interpreter's files before it is frozen."""


def test_postmortem_the_page_cache_hands_no_salt_to_the_fresh_process(box, tmp_path):
    """The loaded process reads a file for a 1 and drops it from the page cache for a 0; the fresh one tests each
    with mincore(): a salted key must still pay twice (once it is frozen, every page of every file a sandbox
    opened is cached again)."""
    report = _refund_recheck(box, tmp_path, _covert(SALT_IN_THE_PAGE_CACHE), ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])


NOTING_RECONCILE = """import os

_NOTES = "/tmp/.notes"  # the sandbox's own /tmp: every fork of the learner's process shares it


def _noted():
    return open(_NOTES).read() if os.path.exists(_NOTES) else ""


def reconcile(cp, tools):
    p = cp.pending_tool_use
    if p is not None and p.name == "delete_database" and _noted():  # the visible check's call (the kit names it)
        raise RuntimeError(_noted()[-100:])  # a reason keeps 160 characters of the check's text
    if p is not None:  # any other call: a hidden check's input, noted, then answered right
        with open(_NOTES, "a") as f:
            f.write(p.name + " ")
    return _honest(cp, tools)
"""


def test_reconcile_a_visible_failure_carries_no_hidden_input(box, tmp_path):
    """A right reconcile that notes every call a hidden check makes and raises them at a later visible check's call:
    no learner-facing reason may name a hidden case (``count_notes``, a tool only the hidden module knows), since
    every visible call is re-checked before any hidden one."""
    from resumable_core.course.grading.steps.workers import recheck_outcome

    honest = solution_answers("reconcile")
    answer = honest["reconcile"].replace("def reconcile(", "def _honest(") + "\n\n" + NOTING_RECONCILE
    cells = ["test_read_only_tools", "test_unknown_tool"]
    nb = samples.submission(nbformat.read(str(RELEASES["reconcile"]), as_version=4), {**honest, "reconcile": answer})
    nbformat.write(nb, str(tmp_path / "reconcile.ipynb"))
    report = isolated.run(
        tmp_path / "reconcile.ipynb", "reconcile", source=SOURCES["reconcile"], only=cells, timeout=30, backend=box
    )
    failed, _ = recheck_outcome(cells, report, report.inconclusive, report.visible_failures)
    assert report["test_read_only_tools"] is None, dict(report)  # the hidden calls were answered right
    assert not [why for why in failed.values() if "count_notes" in why], failed


# -- 7. what the red team of issue 31's new design found ----------------------------------------------

UNREAD_FILES = 'sorted(glob.glob(sys.base_prefix + "/lib/python3*/test/test_*.py"))[:33]'
"""Files of the interpreter no grading run reads (the standard library's own tests)."""

SALT_IN_WHAT_SETTLE_CACHES = (
    MINCORE
    + """import glob, sys, uuid

_FILES = """
    + UNREAD_FILES
    + """


def _send(value):
    # bit 0: a salt is there; bits 1-32: its value, as files merely opened (1) or left alone (0): nothing is read,
    # but the grader caches every file a sandbox opened before the fresh process starts
    for i, path in enumerate(_FILES):
        if (value << 1 | 1) >> i & 1:
            os.close(os.open(path, os.O_RDONLY))
    return str(value)


def _receive():
    bits = sum(_cached(path) << i for i, path in enumerate(_FILES))
    return str(bits >> 1 & 0xFFFFFFFF) if bits & 1 else uuid.uuid4().hex


_RUN = _receive() if os.path.exists("/grading/hand") else _send(uuid.uuid4().int & 0xFFFFFFFF)
"""
)
"""A salt the loaded process leaves in which files it opened (the grader once cached every file a sandbox opened)."""


def _evicted(pattern: str) -> None:
    """The host drops ``pattern``'s files from the page cache: a machine that never read them (as after a boot)."""
    import glob
    import os

    for path in glob.glob(pattern):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def test_postmortem_which_files_were_opened_hands_no_salt_to_the_fresh_process(box, tmp_path):
    """The loaded process only opens a file for a 1 and leaves it alone for a 0; were the grader to read every file
    a sandbox opened into the page cache, the fresh one would find the 1s cached and the 0s not (mincore()): a
    salted key must still pay twice (the fresh process finds every file it opens cached, whatever was opened)."""
    import sys

    _evicted(sys.base_prefix + "/lib/python3*/test/test_*.py")
    report = _refund_recheck(box, tmp_path, _covert(SALT_IN_WHAT_SETTLE_CACHES), ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])


SALT_IN_THE_KEY_QUOTA = """import ctypes, os, uuid

_MOD = 1 << 20
_libc = ctypes.CDLL(None, use_errno=True)


def _quota_bytes():
    # the kernel's keys are counted per user, not per sandbox: every sandbox of the grader's uid reads the same line
    for line in open("/proc/key-users"):
        uid, _, rest = line.partition(":")
        if int(uid) == os.getuid():
            return int(rest.split()[3].split("/")[0])
    return 0


def _add(size):
    # a key in this process's own keyring: it lives as long as the process, frozen or not
    _libc.syscall(248, b"user", uuid.uuid4().hex.encode(), b"k" * size, size, ctypes.c_int(-2))  # add_key


def _send(value):
    # the salt is the user's key bytes modulo 2**20: add keys until they say it
    _add(1)  # the first key also makes the process's keyring
    before = _quota_bytes()
    _add(1)
    overhead = _quota_bytes() - before - 1
    for _ in range(200):
        need = (value - _quota_bytes()) % _MOD
        if need == 0:
            break
        _add(min(32767, need - overhead) if need > overhead else 32767)
    return str(value)


_RUN = str(_quota_bytes() % _MOD) if os.path.exists("/grading/hand") else _send(uuid.uuid4().int % _MOD)
"""
"""A salt the loaded process leaves in the kernel's key quota of its host uid: the fresh one's, where each has its own."""


def test_postmortem_the_key_quota_hands_no_salt_to_the_fresh_process(box, tmp_path):
    """The loaded process adds keys to its own keyring (add_key) until its uid's key bytes modulo 2**20 are its
    salt; the fresh one reads them in /proc/key-users (it could also probe the quota left with add_key): a salted
    key must still pay twice."""
    if Guarantee.OWN_HOST_UID not in box.guarantees():
        pytest.xfail("every sandbox runs under the grader's uid here (it is not root)")
    report = _refund_recheck(box, tmp_path, _covert(SALT_IN_THE_KEY_QUOTA), ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])


def _largest_files(roots: list[str], over: int) -> list[str]:
    """The largest regular files under ``roots``, biggest first, until they hold more than ``over`` bytes."""
    import os

    found = []
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    found.append((os.path.getsize(path), path))
    chosen, total = [], 0
    for size, path in sorted(found, reverse=True):
        if total > over:
            break
        chosen.append(path)
        total += size
    return chosen


def test_a_settled_job_has_no_more_read_for_it_than_its_memory_cap(tmp_path):
    """A settled job (a restarted call's process) that only opens the largest files it sees must not make the
    grader read them all into the page cache, on its account and outside every cgroup (the red team: 100 files,
    3.8 GiB, opened in 0.25 s, read in 11.8 s, and again for every later student). Past the job's memory cap read
    for it, its opens are refused: only its own restarted call fails."""
    import sys

    from resumable_core.course.grading.isolation import Job, Limits, Mount, shared

    if not shared.available():
        pytest.skip("a settled job needs CAP_SYS_ADMIN")
    cap = 128 << 20
    files = _largest_files([sys.base_prefix, sys.prefix], over=cap + (64 << 20))
    _evicted_paths(files)
    (tmp_path / "files.json").write_text(json.dumps(files), encoding="utf-8")
    opener = "import json, os\nfor p in json.load(open('/grading/in/files.json')):\n"
    opener += (
        "    try:\n        os.close(os.open(p, os.O_RDONLY))\n    except PermissionError:\n        print('refused')"
    )
    (tmp_path / "scratch").mkdir()
    box = BwrapBackend(limits=Limits(memory=cap))
    outcome = box.run(
        Job(
            (sys.executable, "-c", opener),
            tmp_path / "scratch",
            (Mount(tmp_path / "files.json", "/grading/in/files.json"),),
            settled=True,
        )
    )
    assert outcome.returncode == 0, outcome
    read = sum(_cached_bytes(path) for path in files)
    assert read <= cap, f"the grader read {read >> 20} MiB for a job capped at {cap >> 20} MiB"
    assert b"refused" in outcome.stdout  # what it did not read, it did not let the job open


def _evicted_paths(paths: list[str]) -> None:
    import os

    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _cached_bytes(path: str) -> int:
    """Bytes of ``path`` in the page cache (``cachestat``, as the grader asks)."""
    import ctypes
    import os

    from resumable_core.course.grading.isolation import shared

    fd = os.open(path, os.O_RDONLY)
    try:
        got = shared._Stat()
        shared._libc.syscall(shared._CACHESTAT, fd, ctypes.byref(shared._Range(0, 0)), ctypes.byref(got), 0)
        return got.cache * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(fd)


HOLD_WATCHES = """import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
made = {}
for name, make in (("inotify", lambda: libc.inotify_init1(os.O_CLOEXEC)), ("fanotify", lambda: libc.fanotify_init(0x200, 0))):
    fds = []
    while len(fds) < 4096 and (fd := make()) >= 0:  # FAN_REPORT_FID: no privilege needed
        fds.append(fd)
    made[name] = fds
print({name: len(fds) for name, fds in made.items()}, flush=True)
open("/grading/out/ready", "w").close()
while not os.path.exists("/grading/out/stop"):
    time.sleep(0.02)
"""


def test_a_sandbox_cannot_take_the_graders_inotify_and_fanotify(tmp_path):
    """The kernel counts inotify instances and fanotify groups for the host uid, over every process of it (128 of
    each). A job that holds all it may make must leave the grader's own: were it the grader's uid, no process of
    the grader could make one, and a grading process started then (a worker, a Dask task's) could not make the
    fanotify group its sandboxes' overlays report to (the red team's denial of service). It is also a channel:
    the loaded process holds all but its salt's count, and the fresh one counts how many it may make. Where the
    grader is root, each sandbox runs under a host uid of its own (``Guarantee.OWN_HOST_UID``)."""
    import ctypes
    import os
    import sys
    import threading

    from resumable_core.course.grading.isolation import Job, Mount

    box = BwrapBackend()
    if Guarantee.OWN_HOST_UID not in box.guarantees():
        pytest.xfail("every sandbox runs under the grader's uid here (it is not root)")
    out = tmp_path / "out"
    out.mkdir(), (tmp_path / "scratch").mkdir()
    job = Job((sys.executable, "-c", HOLD_WATCHES), tmp_path / "scratch", (Mount(out, "/grading/out", writable=True),))
    held = threading.Thread(target=box.run, args=(job,))
    held.start()
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        while held.is_alive() and not (out / "ready").exists():
            threading.Event().wait(0.02)
        assert held.is_alive()
        made = [libc.inotify_init1(0o2000000), libc.fanotify_init(0x200 | 1, 0)]  # CLOEXEC both
        for fd in made:
            if fd >= 0:
                os.close(fd)
    finally:
        (out / "stop").touch()
        held.join(30)
    assert all(fd >= 0 for fd in made), f"the grader could make no {['inotify', 'fanotify'][made.index(-1)]}"


SALT_PER_BOOT = """import uuid

_RUN = open("/proc/sys/kernel/random/boot_id").read().strip()  # drawn once per boot: a restarted harness reads it too
"""
"""A salt per boot of the machine: a re-run after the machine crashed pays twice, one after a process crash not."""


@pytest.mark.xfail(strict=True, reason="every sandbox reads the host's boot_id: the fresh process models no reboot")
def test_postmortem_a_key_salted_per_boot_does_not_score(box, tmp_path):
    """A key salted with the machine's boot_id is the same in the fresh process (one machine, one boot), yet a re-run
    after the machine crashed sends another and pays twice: the contract's key comes from what names the refund.
    (Also the boot time in /proc/stat, time.time() - time.monotonic(), an hour's number from the clock.)"""
    report = _refund_recheck(box, tmp_path, _covert(SALT_PER_BOOT), ["test_refund_kill"])
    assert_no_hole(report, ["test_refund_kill"])


def test_the_graders_venv_shows_no_hidden_checks(monkeypatch):
    """On the hub the grader runs staff-env's Python, whose site-packages holds the whole library as a plain package
    (``hub/build.make_env``), and every sandbox sees the grader's venv read-only: a learner reads ``course/hidden``
    (the answer key, the answer strategies) there, or puts it on ``resumable_core.course.__path__`` and calls them."""
    import sys
    import tempfile

    from resumable_core.course.grading.isolation import Job

    with tempfile.TemporaryDirectory(dir="/tmp") as top:  # not under /dev, which the sandbox mounts anew
        venv = Path(top, "staff-env")
        site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        shutil.copytree(REPO / "resumable_core" / "course" / "hidden", site / "resumable_core" / "course" / "hidden")
        monkeypatch.setattr(sys, "prefix", str(venv))  # the grader's Python is staff-env's
        python = Path(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
        reader = "import glob, sys\nfor p in glob.glob(sys.argv[1] + '/lib/*/site-packages/resumable_core/**/*.py', recursive=True):\n    print(open(p).read())"
        Path(top, "scratch").mkdir()
        outcome = BwrapBackend().run(Job((str(python), "-c", reader, str(venv)), Path(top, "scratch")))
    assert outcome.returncode == 0, outcome
    assert b"ANSWER_KEY" not in outcome.stdout, "the hidden checks are readable in the sandbox"

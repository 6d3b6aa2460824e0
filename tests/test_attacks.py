"""Red team: hostile submissions against ``grade`` in the sandbox, all in one ``--jobs 2`` run with two controls.

Every attacker is the released reconcile notebook with a wrong ``reconcile`` (tests/attack_samples.py),
so any point over what that answer honestly earns is undeserved. One test per attack family of
issue 10; every test also relies on the run as a whole: the controls keep their scores and the
checkout is byte-identical afterwards.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import attack_samples as attacks  # tests/ is on sys.path under pytest (rootdir-relative import)
import grading_samples as samples
import nbformat
import pytest
from graded_classes import TIMEOUT  # tests/ is on sys.path under pytest

from resumable_core.course.grading.isolation import BwrapBackend, Job, Limits

REPO = Path(__file__).resolve().parent.parent
RELEASED = REPO / "exercises" / "reconcile" / "reconcile.ipynb"
SOURCE = REPO / "solutions" / "reconcile" / "reconcile.ipynb"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
MAX = 29

pytestmark = [
    pytest.mark.slow,
    pytest.mark.nbgrader,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed (apt-get install bubblewrap)"),
    pytest.mark.skipif(not SOURCE.exists() or not RELEASED.exists(), reason="the reconcile assignment is not there"),
]


def _tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (``__pycache__`` included) and the hash of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _checkout() -> dict[str, dict[str, str]]:
    """What no submission may change: the library, solutions/, exercises/ and site-packages' hooks and names."""
    return {
        "library": _tree_digest(REPO / "resumable_core"),
        "solutions": _tree_digest(REPO / "solutions"),
        "exercises": _tree_digest(REPO / "exercises"),
        "pth": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SITE.glob("*.pth")},
        "site-packages": dict.fromkeys(sorted(p.name for p in SITE.iterdir()), ""),
    }


class _Server:
    """A port on localhost that hands the correct answer to whoever connects, and counts them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.sendall(samples.REAL_CORRECT.encode())


def _marked_processes() -> list[str]:
    """Processes whose command line carries the attacks' marker."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and attacks.MARKER.encode() in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            continue
    return found


class Run:
    """The one grading run every test reads."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.out = base / "out"
        self.klass = base / "class"
        self.tmp = base / "tmp"
        self.server = _Server()
        self.before = _checkout()
        self.class_before: dict[str, str] = {}

    def grade(self) -> None:
        from resumable_core.course.grading.pipeline import grade

        paths = {"REPO": str(REPO), "OUT": str(self.out), "CLASS": str(self.klass), "SITE": str(SITE)}
        attacks.write_attack_class(RELEASED, self.klass, {**paths, "PORT": str(self.server.port)})
        self.class_before = _tree_digest(self.klass)
        self.tmp.mkdir()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ANTHROPIC_API_KEY", attacks.FAKE_KEY)
            mp.setenv("TMPDIR", str(self.tmp))
            mp.setattr(tempfile, "tempdir", None)  # tempfile caches the folder it found first
            mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
            self.result = grade(self.klass, "reconcile", jobs=2, out=self.out, timeout=TIMEOUT, echo=print)
        self.subs = {s.student: s for s in self.result.submissions}
        self.server.sock.close()

    def score(self, student: str) -> float:
        return self.subs[student].score


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[Run]:
    the_run = Run(tmp_path_factory.mktemp("attacks"))
    target = REPO / "resumable_core" / "course" / "checks" / "reconcile.py"
    kept = target.read_bytes()
    try:
        the_run.grade()
        yield the_run
    finally:  # a successful attack must not leave the shared checkout broken for everyone else
        target.write_bytes(kept)
        for pth in SITE.glob(f"zz_{attacks.MARKER}.pth"):
            pth.unlink()


def test_the_controls_keep_their_scores_and_the_run_completes(run):
    """The honest correct and wrong answers score what they score alone; every student has a row."""
    assert (run.score("correct"), run.score("wrong")) == (attacks.CORRECT_SCORE, attacks.WRONG_SCORE)
    assert {s.max_score for s in run.subs.values() if s.status == "graded"} == {MAX}
    students = {*attacks.ATTACKS, *attacks.CONTROLS, "metadata_tricks", "twin"}
    assert set(run.subs) == students
    with open(run.result.csv_path, newline="") as f:
        assert sorted(r["student_id"] for r in csv.DictReader(f)) == sorted(students)


def test_the_checkout_venv_and_temp_folders_are_as_they_were(run):
    """Library, solutions/, exercises/, site-packages and the class folder are byte-identical; no temp file is left."""
    after = _checkout()
    for part, digest in run.before.items():
        assert after[part] == digest, part
    assert _tree_digest(run.klass) == run.class_before
    assert list(run.tmp.iterdir()) == []  # the grader's TMPDIR: every scratch, copy and sandbox folder went


def test_tampering_with_the_gradebook_output_and_classmates_gets_nothing(run):
    """Writes to every gradebook, grades.csv, a classmate's feedback and notebooks reach nothing."""
    assert run.score("tamper") <= attacks.WRONG_SCORE
    assert run.subs["tamper"].status == "graded"
    autograded = run.out / "autograded" / "tamper" / "reconcile" / "reconcile.ipynb"
    assert "tampered: []" in autograded.read_text()


def test_rewriting_the_library_site_packages_pth_and_pycache_gets_nothing(run):
    """Every write to the library, its copy, site-packages and __pycache__ is refused; the checks still fail."""
    assert run.score("rewrite_library") <= attacks.WRONG_SCORE
    autograded = run.out / "autograded" / "rewrite_library" / "reconcile" / "reconcile.ipynb"
    hits = _printed_list(autograded, "rewritten: ")
    # A checkout under /tmp (a CI clone) is shadowed by the sandbox's private /tmp: writes there land
    # in that throwaway tmpfs, never on the host (the checkout test below compares bytes).
    assert [h for h in hits if not h.startswith("/tmp/")] == [], hits


def _printed_list(notebook: Path, prefix: str) -> list[str]:
    """The list a submission printed after ``prefix`` in its graded notebook's outputs."""
    for cell in nbformat.read(str(notebook), as_version=4).cells:
        for out in cell.get("outputs", []):
            for line in str(out.get("text", "")).splitlines():
                if line.startswith(prefix):
                    return list(ast.literal_eval(line[len(prefix) :]))
    raise AssertionError(f"{notebook} has no output line starting {prefix!r}")


def test_a_forged_result_and_a_process_outliving_the_kernel_get_nothing(run):
    """A background forger rewriting the result file and filing reports scores no more than the wrong answer."""
    assert run.score("forge_result") <= attacks.WRONG_SCORE
    assert _marked_processes() == []
    assert run.score("correct") == attacks.CORRECT_SCORE and "kernel died" not in run.subs["correct"].reason


def test_solutions_source_secrets_and_network_are_out_of_reach(run):
    """solutions/, the source notebook, ANTHROPIC_API_KEY and a localhost port: nothing read, nothing gained."""
    assert run.score("read_secrets") <= attacks.WRONG_SCORE
    assert run.server.connections == 0
    leaked = [p for p in run.out.rglob("*") if p.is_file() and attacks.FAKE_KEY.encode() in p.read_bytes()]
    assert leaked == []
    autograded = run.out / "autograded" / "read_secrets" / "reconcile" / "reconcile.ipynb"
    assert "key: None stolen: 0" in autograded.read_text()


def test_filling_the_folders_the_learner_shares_with_the_host_gains_nothing(run):
    """A tmpfs filled once the cells ran, or before an exit, fails only the filler: no crash, no hang, no score."""
    for student in ("fill_shared", "fill_then_exit"):
        assert run.score(student) <= attacks.WRONG_SCORE, run.subs[student].reason
    assert "exited with code" not in run.subs["correct"].reason  # the worker lived on to grade the rest


def test_a_score_nbgrader_saved_before_failing_is_never_kept(run):
    """An output that makes nbgrader fail after saving the earlier cells' scores leaves the student with 0."""
    over = run.subs["over_max"]
    assert over.status == "failed" and over.score == 0, over.reason


def test_the_level1_answer_key_cannot_be_read(run):
    """Level 1 answered from the hidden module's ANSWER_KEY scores only what the wrong level-1 answer earns."""
    assert run.score("answer_key") <= attacks.WRONG_LEVEL1_SCORE


def test_memory_fork_disk_and_output_bombs_cost_only_the_bomber(run):
    """The bombs are stopped and cost the bomber its later cells, and the controls are untouched.

    The output flood goes nowhere: the learner's process writes its cells' output into the notebook,
    and its own fd 1 is /dev/null.
    """
    bombs = run.subs["bombs"]
    assert bombs.score <= attacks.WRONG_SCORE
    assert "not run" in bombs.reason or "needs review" in bombs.reason
    assert (run.score("correct"), run.score("wrong")) == (attacks.CORRECT_SCORE, attacks.WRONG_SCORE)


def test_memory_is_capped_for_the_whole_sandbox(run):
    """Processes of one sandbox together hold no more than its 1 GiB: at most two of 4 x 500 MiB."""
    autograded = (run.out / "autograded" / "bombs" / "reconcile" / "reconcile.ipynb").read_text()
    held = int(autograded.split("held at once: ", 1)[1].split(" ", 1)[0])
    assert held * 500 <= 1024


def test_killing_the_worker_or_the_parent_costs_only_the_killer(run):
    """SIGKILL to the process's parent and to -1 stays in the sandbox: the killer gets nothing, the run goes on."""
    killer = run.subs["kill_parent"]
    assert killer.score <= attacks.WRONG_SCORE and killer.status == "graded"
    # its parent is outside its PID namespace (getppid() is 0 there): the kill fails, or ends only the sandbox
    assert "exited with code" not in run.subs["correct"].reason
    assert run.score("correct") == attacks.CORRECT_SCORE


def test_fake_student_ids_are_ignored(run):
    """Reports and metadata in the name of a student who does not exist: no row, no crash."""
    assert run.score("forged_output") <= attacks.WRONG_SCORE
    assert "no_such_student" not in run.subs and "no_such_student" not in run.result.csv_path.read_text()


def test_metadata_tricks_are_put_right(run):
    """A duplicate passing test, a missing grade_id, edited points and checksums: the release's metadata wins."""
    tricks = run.subs["metadata_tricks"]
    assert tricks.score <= attacks.WRONG_SCORE and tricks.max_score == MAX
    assert "nbgrader metadata" in tricks.reason


def _live_html(page: str) -> list[str]:
    """The script tags and on* handlers a browser would find in ``page``."""
    found: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend([tag] if tag == "script" else [a for a, _ in attrs if a.startswith("on")])

    Tags().feed(page)
    return found


def test_report_lines_held_pipes_inconclusive_script_and_collisions(run):
    """Forged report lines and held pipes, a forced-inconclusive re-check, a script in feedback, two files one id."""
    assert run.score("forged_output") <= attacks.WRONG_SCORE and _marked_processes() == []
    assert "kernel died" not in run.subs["correct"].reason
    forced = run.subs["force_inconclusive"]
    # no kernel anywhere: it ends the one process that runs its cells and is graded by what ran before
    assert forced.score <= attacks.WRONG_SCORE and "not run" in forced.reason
    for student in ("forged_output", "correct"):
        assert _live_html((run.out / "feedback-html" / f"{student}.html").read_text()) == []
    assert attacks.MARKER not in (run.out / "feedback-html" / "correct.html").read_text()
    twin = run.subs["twin"]
    assert twin.status == "invalid" and twin.score == 0 and "'twin.ipynb' and 'twin..ipynb'" in twin.reason


_WRITE_EVERYWHERE = """
import os
# names no checkout or venv can hold: a clone at /tmp/x has its venv bound at /tmp/x/.venv
for path in ("/probe", "/work/main/resumable_core/probe", "/tmp/root-probe", "/home/learner/root-probe",
             "/grading/scratch/root-probe"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write("x")
        print("wrote", path)
    except OSError:
        pass
"""


def test_the_sandbox_root_is_read_only(tmp_path):
    """bwrap's own root is an uncapped tmpfs in memory: only the scratch folder, /tmp and HOME take writes."""
    result = BwrapBackend(None, Limits(wall=60)).run(Job((sys.executable, "-c", _WRITE_EVERYWHERE), tmp_path))
    assert result.stdout.decode().split("\n")[:-1] == [
        "wrote /tmp/root-probe",
        "wrote /home/learner/root-probe",
        "wrote /grading/scratch/root-probe",
    ]

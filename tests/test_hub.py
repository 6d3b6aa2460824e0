"""The class on JupyterHub: accounts, the exchange, formgrader as a service, the students' library, a term in a browser.

The fast tests read the configuration the kit writes. The slow ones (root only) build a real class
under a temporary root with test accounts (``ra-t-`` prefix, removed at the end), start JupyterHub
with the DummyAuthenticator on free ports, log in as a student and walk a term through the hub in
Debian's chromium. Every server they start is stopped; every account they make is removed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import grading_samples
import httpx
import pytest
from traitlets.config import Config

from resumable_core.course import release
from resumable_core.course.hub import accounts, build, config, term

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("RESUMABLE_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
PREFIX = "ra-t-"
ASSIGNMENT = "reconcile"  # tests/grading_samples.py's answers are this assignment's
WRITTEN = "level1_why"  # its written answer, 3 points, graded by hand in formgrader
SPAWN_TIMEOUT = 240  # seconds: a loaded 2-core machine starts JupyterLab slowly


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _settings(root: Path, **changes) -> build.HubSettings:
    return build.HubSettings(str(root), prefix=PREFIX, assignments=[ASSIGNMENT], **changes)


# -- the configuration, read without starting anything ---------------------------------------


def _configured(settings: build.HubSettings, tmp_path: Path) -> Config:
    settings.root = str(tmp_path)
    settings.paths.hub.mkdir(parents=True, exist_ok=True)
    c = Config()
    config.configure(c, settings.save())
    return c


def test_roster_names_carry_the_prefix():
    """Every account of the class starts with the prefix; the staff are the instructor and the grader."""
    roster = accounts.Roster("ra-")
    assert roster.everyone == ("ra-instructor", "ra-grader", "ra-student1", "ra-student2", "ra-student3")
    assert roster.staff == ("ra-instructor", "ra-grader")
    assert all(name.startswith("ra-") for name in (*roster.everyone, roster.staff_group))


def test_formgrader_is_a_service_of_the_instructor_open_to_the_formgrade_group(tmp_path):
    """Formgrader runs as the instructor in the course folder, and only the formgrade-<course> group may reach it."""
    settings = _settings(tmp_path)
    c = _configured(settings, tmp_path)
    (service,) = c.JupyterHub.services
    assert service["name"] == settings.course_id and service["user"] == f"{PREFIX}instructor"
    assert service["cwd"] == str(settings.paths.course)
    assert service["environment"]["JUPYTERHUB_DEFAULT_URL"] == "/formgrader"
    group = f"formgrade-{settings.course_id}"
    assert c.JupyterHub.load_groups[group] == {"users": [f"{PREFIX}instructor", f"{PREFIX}grader"]}
    assert c.JupyterHub.load_roles == [
        {"name": group, "groups": [group], "scopes": [f"access:services!service={settings.course_id}"]}
    ]
    assert config.formgrader_url(settings).endswith(f"/services/{settings.course_id}/formgrader")


def test_authenticator_and_spawner_come_from_the_settings(tmp_path):
    """PAM by default, the DummyAuthenticator when asked (tests); the local spawner; the Python proxy."""
    assert _configured(_settings(tmp_path), tmp_path).JupyterHub.authenticator_class == config.AUTHENTICATORS["pam"]
    c = _configured(_settings(tmp_path, authenticator="dummy", dummy_password="pw"), tmp_path)
    assert c.JupyterHub.authenticator_class == "jupyterhub.auth.DummyAuthenticator"
    assert c.JupyterHub.spawner_class == "jupyterhub.spawner.LocalProcessSpawner"
    assert Path(c.ConfigurableHTTPProxy.command[0]).name == "configurable-http-proxy"


@dataclass
class _FakeSpawner:
    user: object
    environment: dict = field(default_factory=dict)
    cmd: list = field(default_factory=list)


def test_students_servers_run_the_student_environment(tmp_path):
    """The spawn hook gives a student the student kit's Python and the staff the whole library's."""
    settings = _settings(tmp_path)
    hook = _configured(settings, tmp_path).Spawner.pre_spawn_hook
    for name, env in ((f"{PREFIX}student2", settings.paths.student_env), (f"{PREFIX}grader", settings.paths.staff_env)):
        spawner = _FakeSpawner(user=type("User", (), {"name": name})())
        hook(spawner)
        assert spawner.cmd == [str(env / "bin" / "python"), "-m", "jupyterhub.singleuser"]


def test_course_and_student_configs_name_the_course_and_exchange(tmp_path):
    """The course's config sets course_id, the exchange root and a given db_url; a student's, course and exchange."""
    settings = _settings(tmp_path, db_url="sqlite:////elsewhere/gradebook.db")
    course = build.course_config(settings)
    assert "c.CourseDirectory.course_id = 'resumable'" in course
    assert f"c.Exchange.root = {str(settings.paths.exchange)!r}" in course
    assert "c.CourseDirectory.db_url = 'sqlite:////elsewhere/gradebook.db'" in course
    assert "db_url" not in build.course_config(_settings(tmp_path))  # SQLite in the course folder by default
    student = build.student_config(settings)
    assert "course_id = 'resumable'" in student and str(settings.paths.exchange) in student


def test_a_package_the_shared_python_cannot_run_is_found(tmp_path):
    """The environments run a Python every account can reach, maybe an older patch release than the venv's own."""
    for name, requires in (("soupsieve-4.1.3", ">=3.11.5"), ("nbconvert-7.17.2", ">=3.9"), ("old-1.0", "")):
        (tmp_path / f"{name}.dist-info").mkdir()
        header = f"Requires-Python: {requires}\n" if requires else ""
        (tmp_path / f"{name}.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\n{header}")
    assert [p.name for p in build._unsupported(tmp_path, "3.11.2")] == ["soupsieve-4.1.3.dist-info"]
    assert build._unsupported(tmp_path, "3.11.7") == []


# -- a real class ----------------------------------------------------------------------------


@dataclass
class Hub:
    """A running class: its settings, the hub's process and address."""

    settings: build.HubSettings
    process: subprocess.Popen
    password: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port}"


def _wait_for(url: str, timeout: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterHub exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:  # the proxy answers 404 before the hub's route is in
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError(f"{url} did not answer in {timeout} s")


def _class_processes(roster: accounts.Roster) -> list[int]:
    """Pids of processes run by the class's accounts (the servers this hub started)."""
    uids = set()
    for name in roster.everyone:
        with contextlib.suppress(KeyError):
            uids.add(pwd.getpwnam(name).pw_uid)
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in uids:
                    pids.append(int(entry.name))
            except FileNotFoundError:
                pass
    return pids


def _stop(hub: Hub) -> None:
    """Stop the hub (it stops the servers, the service and the proxy), then anything of the class left over."""
    if hub.process.poll() is None:
        os.killpg(hub.process.pid, signal.SIGTERM)
        try:
            hub.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(hub.process.pid, signal.SIGKILL)
            hub.process.wait()
    proxy_pid = hub.settings.paths.hub / "jupyterhub-proxy.pid"  # the proxy runs in a session of its own
    if proxy_pid.is_file():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(proxy_pid.read_text().strip()), signal.SIGTERM)
    for pid in _class_processes(hub.settings.roster):  # only this class's accounts: nothing else is touched
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    if os.geteuid() != 0:
        pytest.skip("the class needs root: it makes UNIX accounts and runs JupyterHub's local spawner")
    if build.readable_by_others(Path(tempfile.gettempdir())) is False:
        pytest.skip("the temporary folder is not reachable by other accounts")
    root = Path(tempfile.mkdtemp(prefix="ra-hub-", dir="/tmp"))
    password = uuid.uuid4().hex
    ports = {name: _free_port() for name in ("port", "hub_port", "proxy_api_port", "service_port")}
    settings = _settings(root, authenticator="dummy", dummy_password=password, **ports)
    process = None
    try:
        build.setup(settings, log=lambda line: None)
        log = open(root / "hub.log", "w")  # noqa: SIM115 - closed with the hub below
        hub_bin = Path(settings.repo_venv) / "bin" / "jupyterhub"
        process = subprocess.Popen(
            [str(hub_bin), "-f", str(settings.paths.hub / "jupyterhub_config.py")],
            cwd=settings.paths.hub,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running = Hub(settings, process, password)
        _wait_for(f"{running.url}/hub/api", 180, process)
        print(f"\nthe class: {root} (hub log: {root / 'hub.log'})")
        yield running
    finally:
        if process is not None:
            _stop(Hub(settings, process, password))
            log.close()
            shutil.copyfile(root / "hub.log", tmp_path_factory.getbasetemp() / "hub.log")
            print(f"hub log: {tmp_path_factory.getbasetemp() / 'hub.log'}")
        accounts.remove(PREFIX)
        shutil.rmtree(root, ignore_errors=True)


class Session:
    """One person logged in to the hub through its login form, holding an API token of theirs."""

    def __init__(self, hub: Hub, name: str) -> None:
        self.hub, self.name = hub, name
        self.http = httpx.Client(base_url=hub.url, follow_redirects=False, timeout=120)
        self.http.get("/hub/login")
        form = {"username": name, "password": hub.password, "_xsrf": self._xsrf()}
        response = self.http.post("/hub/login", data=form)
        assert response.status_code == 302, f"login as {name}: {response.status_code}"
        made = self.http.post(
            f"/hub/api/users/{name}/tokens", headers={"X-XSRFToken": self._xsrf()}, json={"expires_in": 3600}
        )
        assert made.status_code == 201, made.text
        self.token = made.json()["token"]
        self.api = httpx.Client(
            base_url=hub.url, headers={"Authorization": f"token {self.token}"}, timeout=120, follow_redirects=False
        )

    def _xsrf(self) -> str:
        return [str(c.value) for c in self.http.cookies.jar if c.name == "_xsrf"][-1]

    def start_server(self) -> None:
        """Spawn this person's server through the hub's REST API and wait until it is ready."""
        started = self.api.post(f"/hub/api/users/{self.name}/server")
        assert started.status_code in (201, 202, 400), started.text  # 400: already running
        deadline = time.monotonic() + SPAWN_TIMEOUT
        while time.monotonic() < deadline:
            server = self.api.get(f"/hub/api/users/{self.name}").json()["servers"].get("", {})
            if server.get("ready"):
                return
            time.sleep(2)
        raise TimeoutError(f"{self.name}'s server was not ready in {SPAWN_TIMEOUT} s")

    def server(self, path: str) -> str:
        return f"/user/{self.name}/{path}"

    def run(self, code: str, timeout: float = 300) -> str:
        """Run ``code`` in a new kernel of this person's server (its websocket) and return what it printed."""
        from tornado.httpclient import HTTPRequest
        from tornado.ioloop import IOLoop
        from tornado.websocket import websocket_connect

        made = self.api.post(self.server("api/kernels"), json={"name": "python3"})
        assert made.status_code == 201, f"starting a kernel: {made.status_code} {made.text}"
        kernel = made.json()["id"]
        url = self.hub.url.replace("http", "ws") + self.server(f"api/kernels/{kernel}/channels")

        async def execute() -> str:
            request = HTTPRequest(url, headers={"Authorization": f"token {self.token}"})
            ws = await websocket_connect(request)
            msg_id = uuid.uuid4().hex
            header = {
                "msg_id": msg_id,
                "msg_type": "execute_request",
                "username": self.name,
                "session": msg_id,
                "version": "5.3",
                "date": "",
            }
            content = {
                "code": code,
                "silent": False,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
            }
            await ws.write_message(
                json.dumps(
                    {
                        "header": header,
                        "parent_header": {},
                        "metadata": {},
                        "content": content,
                        "channel": "shell",
                        "buffers": [],
                    }
                )
            )
            out = []
            while True:
                raw = await ws.read_message()
                if raw is None:
                    raise RuntimeError("the kernel's websocket closed")
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "stream":
                    out.append(msg["content"]["text"])
                elif kind == "error":
                    out.append("\n".join(msg["content"]["traceback"]))
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    ws.close()
                    return "".join(out)

        try:
            # In a thread of its own: Playwright's sync API holds this thread's event loop.
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                return pool.submit(lambda: IOLoop().run_sync(execute, timeout=timeout)).result()
        finally:
            self.api.delete(self.server(f"api/kernels/{kernel}"))

    def nbgrader(self, action: str) -> dict:
        """What the student's Assignments panel does: an nbgrader action on the assignment, on their server."""
        form = {"course_id": self.hub.settings.course_id, "assignment_id": ASSIGNMENT}
        done = self.api.post(self.server(f"assignments/{action}"), data=form)
        assert done.status_code == 200, done.text
        result = done.json()
        assert result.get("success"), f"{action}: {result}"
        return result


PROBE = """
import importlib, os, pathlib
course = pathlib.Path({course!r})
for path in [course / "solutions", course / "gradebook.db", course / "submitted", pathlib.Path({other!r}), pathlib.Path({staff_env!r})]:
    try:
        os.listdir(path) if path.is_dir() else path.read_bytes()
        print("READ", path)
    except PermissionError:
        print("DENIED", path)
for module in ("resumable_core.course.hidden", "resumable_core.course.grading"):
    try:
        importlib.import_module(module)
        print("IMPORTED", module)
    except ImportError:
        print("NO MODULE", module)
import resumable_core.course.checks
print("CHECKS", pathlib.Path(resumable_core.course.checks.__file__).is_relative_to({student_env!r}))
"""


@pytest.mark.slow
def test_a_student_reads_no_answer_no_grade_and_no_classmate(hub: Hub):
    """Logged in through the hub, a student's own kernel cannot read solutions, the gradebook or a classmate's home, nor import the hidden checks."""
    student, other = hub.settings.roster.students[:2]
    session = Session(hub, student)
    session.start_server()
    paths = hub.settings.paths
    probe = PROBE.format(
        course=str(paths.course),
        other=os.path.expanduser(f"~{other}"),
        staff_env=str(paths.staff_env),
        student_env=str(paths.student_env),
    )
    printed = session.run(probe, timeout=120).splitlines()
    assert printed == [
        f"DENIED {paths.course / 'solutions'}",
        f"DENIED {paths.course / 'gradebook.db'}",
        f"DENIED {paths.course / 'submitted'}",
        f"DENIED {os.path.expanduser(f'~{other}')}",
        f"DENIED {paths.staff_env}",
        "NO MODULE resumable_core.course.hidden",
        "NO MODULE resumable_core.course.grading",
        "CHECKS True",
    ]


@pytest.mark.slow
def test_a_students_server_has_no_instructor_panel_and_no_news(hub: Hub):
    """A student's JupyterLab has nbgrader's instructor panels disabled, no formgrader, and fetches no news."""
    student = hub.settings.roster.students[0]
    session = Session(hub, student)
    session.start_server()  # the server of the test above, if it ran
    lab = session.api.get(session.server("lab"))
    assert lab.status_code == 200, lab.status_code
    page_config = json.loads(
        lab.text.split('id="jupyter-config-data" type="application/json">')[1].split("</script>")[0]
    )
    panels = {f"@jupyter/nbgrader:{name}" for name in ("create-assignment", "formgrader", "course-list")}
    assert panels <= set(page_config["disabledExtensions"])
    assert "@jupyter/nbgrader:assignment-list" not in page_config["disabledExtensions"]
    news = session.api.get(session.server("lab/api/settings/@jupyterlab/apputils-extension:notification")).json()
    defaults = {key: news["schema"]["properties"][key]["default"] for key in ("fetchNews", "checkForUpdates")}
    assert defaults == {"fetchNews": "false", "checkForUpdates": False}
    assert session.api.get(session.server("formgrader")).status_code == 404


def _shot(page, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / f"{name}.png"), full_page=False)


def _log_in(page, hub: Hub, name: str, then: str, spawn: bool = True) -> None:
    """The hub's login form, then ``then`` (a path on the hub); ``spawn=False`` goes there straight, spawning no server."""
    page.goto(f"{hub.url}/hub/login" + ("" if spawn else f"?next={quote(then)}"), timeout=60_000)
    page.fill("#username_input", name)
    page.fill("#password_input", hub.password)
    page.click("#login_submit")
    page.wait_for_load_state()
    page.goto(f"{hub.url}{then}", timeout=SPAWN_TIMEOUT * 1000)


def _submission_id(hub: Hub, student: str) -> str:
    """The id formgrader's page of ``student``'s notebook has, from the course gradebook."""
    from nbgrader.api import Gradebook

    from resumable_core.course.release import find_course

    found = find_course(hub.settings.paths.course)
    with Gradebook(found.db_url, found.course_id) as gb:
        return str(gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).id)


def _auto_scores(hub: Hub, student: str) -> dict[str, float | None]:
    """The autograded score of each cell of ``student``'s notebook, from the course gradebook."""
    from nbgrader.api import Gradebook

    from resumable_core.course.release import find_course

    found = find_course(hub.settings.paths.course)
    with Gradebook(found.db_url, found.course_id) as gb:
        return {g.name: g.auto_score for g in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).grades}


def _manual_score(hub: Hub, student: str) -> float | None:
    from nbgrader.api import Gradebook

    from resumable_core.course.release import find_course

    found = find_course(hub.settings.paths.course)
    with Gradebook(found.db_url, found.course_id) as gb:
        return gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, student).manual_score


def _login_shell(user: str, command: str) -> subprocess.CompletedProcess:
    """``command`` in ``user``'s login shell, as JupyterLab's terminal runs it (``bash -l``: /etc/profile resets PATH)."""
    return subprocess.run(["runuser", "-l", user, "-c", command], capture_output=True, text=True, check=False)


@pytest.mark.slow
@pytest.mark.browser
def test_a_whole_term_through_the_hub_in_a_browser(hub: Hub, tmp_path_factory):
    """A student logs in, fetches, answers, checks and submits; the instructor grades; a grader scores in formgrader; the student reads the feedback.

    A classmate works in the Korean notebook the exchange hands out beside the English one
    (``ko/reconcile.ipynb``): graded as the English answers are, and the page they fetch is Korean."""
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM}: install it with `apt-get install -y chromium` (.ci/run does)")
    from playwright.sync_api import expect, sync_playwright

    shots = tmp_path_factory.mktemp("hub-term-screenshots")
    print(f"\nscreenshots: {shots}")
    (student, korean, *_), grader = hub.settings.roster.students, hub.settings.roster.grader
    notebook = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    korean_notebook = f"{ASSIGNMENT}/ko/{ASSIGNMENT}.ipynb"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            # 1. the student logs in (the hub spawns their server), fetches, answers, checks, submits
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            _log_in(page, hub, student, f"/user/{student}/lab")
            expect(page.locator("#jp-main-dock-panel")).to_be_visible(timeout=SPAWN_TIMEOUT * 1000)
            _shot(page, shots, "01-student-lab")
            session = Session(hub, student)
            session.nbgrader("fetch")
            fetched = session.api.get(session.server(f"api/contents/{notebook}")).json()["content"]
            answered = release.fill_in(fetched, grading_samples.answers(grading_samples.REAL_CORRECT))
            saved = session.api.put(
                session.server(f"api/contents/{notebook}"),
                json={"type": "notebook", "format": "json", "content": answered},
            )
            assert saved.status_code == 200, saved.text
            page.goto(f"{hub.url}/user/{student}/lab/tree/{notebook}", timeout=120_000)
            expect(page.get_by_text(grading_samples.WHY[:30]).first).to_be_attached(
                timeout=120_000
            )  # the written answer
            _shot(page, shots, "02-student-answered")
            # as the docs give it, in the student's terminal
            checked = _login_shell(student, f"python -m resumable_core check {notebook}")
            (shots / "03-student-check.txt").write_text(checked.stdout + checked.stderr)
            assert checked.returncode == 0, checked.stdout + checked.stderr
            session.nbgrader("submit")

            # 1b. a classmate fetches both notebooks, answers the Korean one alone and submits (through the API)
            classmate = Session(hub, korean)
            classmate.start_server()
            classmate.nbgrader("fetch")
            fetched = classmate.api.get(classmate.server(f"api/contents/{korean_notebook}")).json()["content"]
            assert fetched["metadata"]["resumable"] == {"lang": "ko"}
            answered = release.fill_in(fetched, grading_samples.answers(grading_samples.REAL_CORRECT))
            saved = classmate.api.put(
                classmate.server(f"api/contents/{korean_notebook}"),
                json={"type": "notebook", "format": "json", "content": answered},
            )
            assert saved.status_code == 200, saved.text
            classmate.nbgrader("submit")

            # 2. the instructor collects and grades, as the instructor's account
            term.collect(hub.settings, ASSIGNMENT)
            graded = term.grade(hub.settings, ASSIGNMENT, "--jobs", "1")
            (shots / "04-instructor-grade.txt").write_text(graded)
            assert _manual_score(hub, student) is None  # the written answer waits for a human
            assert _auto_scores(hub, korean) == _auto_scores(hub, student)  # the same answers, in the Korean notebook

            # 3. the grader scores the written answer in formgrader, in its own tab (no iframe: nbgrader #1870)
            grading = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            service = f"/services/{hub.settings.course_id}/formgrader"
            _log_in(grading, hub, grader, f"{service}/gradebook/{ASSIGNMENT}/{ASSIGNMENT}", spawn=False)
            # nbgrader 0.9.6 lists submissions anonymously ("Submission #1") until "Show All Names",
            # which reveals only the rows already loaded
            expect(grading.get_by_text("Submission #1").first).to_be_visible(timeout=120_000)
            grading.locator("#toggle_names").click()
            expect(grading.get_by_text(student).first).to_be_visible(timeout=120_000)
            _shot(grading, shots, "05-grader-formgrader-list")
            grading.goto(f"{hub.url}{service}/submissions/{_submission_id(hub, student)}/", timeout=120_000)
            score = grading.locator(f"input.score#{WRITTEN}")
            expect(score).to_be_visible(timeout=120_000)
            # the score input saves through a view that formgrader attaches once the grades have loaded
            grading.wait_for_function("() => window.formgrader?.grades?.loaded === true", timeout=120_000)
            score.fill("3")
            score.press("Tab")  # formgrader saves a score on change
            deadline = time.monotonic() + 60
            while _manual_score(hub, student) != 3 and time.monotonic() < deadline:
                time.sleep(1)
            _shot(grading, shots, "06-grader-scored")
            assert _manual_score(hub, student) == 3

            # 4. the instructor releases the kit's feedback pages through the exchange
            assert term.release_feedback(hub.settings, ASSIGNMENT) == sorted([student, korean])

            # 5. the student fetches and reads it
            session.nbgrader("fetch_feedback")
            folders = session.api.get(session.server(f"api/contents/{ASSIGNMENT}/feedback")).json()["content"]
            (stamp,) = [f["name"] for f in folders if f["type"] == "directory"]
            page.goto(
                f"{hub.url}/user/{student}/files/{ASSIGNMENT}/feedback/{stamp}/{ASSIGNMENT}.html", timeout=120_000
            )
            expect(page.locator("body")).to_contain_text(WRITTEN, timeout=60_000)
            _shot(page, shots, "07-student-feedback")
            assert f"<b>{WRITTEN}</b> 3/3" in page.content()
            classmate.nbgrader("fetch_feedback")
            folders = classmate.api.get(classmate.server(f"api/contents/{ASSIGNMENT}/feedback")).json()["content"]
            (stamp,) = [f["name"] for f in folders if f["type"] == "directory"]
            feedback = classmate.api.get(classmate.server(f"files/{ASSIGNMENT}/feedback/{stamp}/{ASSIGNMENT}.html"))
            assert '<html lang="ko">' in feedback.text and WRITTEN in feedback.text
        finally:
            browser.close()

"""Two crash stories the lease and the turn budget answer, played with real processes.

:func:`race_resumers` crashes a run, then starts several resumers of it at the same instant (the
restart script and a cron job, two pods): the run's lease lets one act and refuses the others.
:func:`crash_loop` kills a run at the same point again and again (an OOM loop): the turn charged
on disk before each model call stops it at ``max_turns`` model calls.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from ..claude import make_client
from ..crash import CRASH_POINT_HELP, CrashPlan, run_in_child
from ..errors import LeaseError
from ..loop import MAX_TURNS
from ..run_folder import RunFolder, count_effects, crash_plan
from ..scenarios import scenario
from ..strategies import Reconcile
from .core_words import core
from .i18n import _
from .matrix import resolve_strategy

START_TIMEOUT = 60.0
"""Seconds the resumers wait for each other at the starting line before giving up."""


@contextmanager
def _folder(root: str | Path | None) -> Iterator[str]:
    if root is not None:
        yield str(root)
        return
    with tempfile.TemporaryDirectory(prefix="resumable-race-") as tmp:
        yield tmp


@dataclass
class RaceOutcome:
    """What ``resumers`` concurrent resumers of one crashed run did."""

    crash_point: str
    tool: str
    strategy: str
    resumers: int
    effects: int
    """How many times the crashed call's effect happened in all (emails sent, files read)."""
    emails: int
    """Emails in the outbox at the end, whatever their subject."""
    completed: int
    """Resumers that finished the run themselves (the lease allows one)."""
    found_finished: int
    """Resumers that got the lease after the run was finished: they reported it, made no model call."""
    refused: int
    """Resumers the lease refused (held by another, or taken over): they did nothing."""
    api_error: int
    """Resumers refused by the Messages API (a 400)."""
    other: list[str]
    """Any other ending, one line each (none is expected)."""
    killed: bool
    """The first run really died at its crash point."""

    def to_json(self) -> str:
        """The outcome as one JSON object."""
        return json.dumps(asdict(self), indent=2)

    def story(self) -> str:
        """The outcome in plain lines."""
        return "\n".join(
            [
                _(
                    "Crash {crash_point_help} on the turn that calls {tool}; {resumers} resumers "
                    "start at once with {strategy}."
                ).format(
                    crash_point_help=core(CRASH_POINT_HELP[self.crash_point]),
                    tool=self.tool,
                    resumers=self.resumers,
                    strategy=repr(self.strategy),
                ),
                _(
                    "Completed: {completed}; found it finished: {found_finished}; refused by the "
                    "lease: {refused}; refused by the API: {api_error}; other: {n_other}."
                ).format(
                    completed=self.completed,
                    found_finished=self.found_finished,
                    refused=self.refused,
                    api_error=self.api_error,
                    n_other=len(self.other),
                ),
                _("Effects of the crashed call: {effects}; emails in the outbox: {emails}.").format(
                    effects=self.effects, emails=self.emails
                ),
                *self.other,
            ]
        )


def _resume_once(box: RunFolder, task: str, fn: Reconcile, lease_wait: float) -> str:
    """One resumer's ending, as one line: completed, refused, api_error, or what else happened."""
    import anthropic

    try:
        result = box.run(task, reconcile=fn, lease_wait=lease_wait)
    except LeaseError:
        return "refused"
    except anthropic.BadRequestError:
        return "api_error"
    except Exception as e:  # noqa: BLE001 - reported to the parent as a line, never as a traceback
        return f"{type(e).__name__}: {e}"
    if result.status == "already_finished":
        return "found_finished"
    return "completed" if result.checkpoint.is_finished() else f"stopped: {result.status}"


def _resumer(box: RunFolder, task: str, fn: Reconcile, lease_wait: float, start: Any, out: Path) -> None:
    """A resumer process: wait for the others at the starting line, resume, write its ending."""
    start.wait(START_TIMEOUT)
    out.write_text(_resume_once(box, task, fn, lease_wait))


def _start_all(processes: Sequence[BaseProcess]) -> None:
    # Same reason as crash._fork: a kernel's threads make 3.12+ warn on fork; the children run
    # only this kit's single-threaded code.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
        for p in processes:
            p.start()


def race_resumers(
    crash_point: str,
    tool: str,
    strategy: str | Reconcile,
    resumers: int = 2,
    *,
    lease_wait: float = 0.0,
    crash_tool: str | None = None,
    root: str | Path | None = None,
) -> RaceOutcome:
    """Crash ``tool``'s run for real at ``crash_point``, then resume it from ``resumers`` processes at once.

    ``strategy``: a registered strategy's name, or any ``reconcile(cp, tools)`` function.
    ``crash_tool``: crash on the first turn that calls this tool instead (e.g. the email run's
    ``read_file`` turn). With ``lease_wait`` > 0 a refused resumer waits for the lease instead,
    and finds the run finished.
    """
    sc = scenario(tool)
    name, fn, needs_ledger = resolve_strategy(strategy)
    if crash_tool is None:
        plan = crash_plan(tool, crash_point)
    else:
        plan = CrashPlan(crash_point, tool=crash_tool)
    ctx = multiprocessing.get_context("fork")
    with _folder(root) as where:
        box = RunFolder.create(where, ledger=needs_ledger)
        killed = run_in_child(lambda: box.run(sc.task, crash=plan)) == "killed"
        start = ctx.Barrier(resumers)
        outs = [Path(where) / f"resumer-{i}.txt" for i in range(resumers)]
        processes = [ctx.Process(target=_resumer, args=(box, sc.task, fn, lease_wait, start, o)) for o in outs]
        _start_all(processes)
        for p in processes:
            p.join()
        endings = [
            o.read_text() if o.exists() else f"resumer died (exit code {p.exitcode})" for o, p in zip(outs, processes)
        ]
        return RaceOutcome(
            crash_point=crash_point,
            tool=tool,
            strategy=name,
            resumers=resumers,
            effects=count_effects(tool, box.world),
            emails=len(box.world.sent_emails()),
            completed=endings.count("completed"),
            found_finished=endings.count("found_finished"),
            refused=endings.count("refused"),
            api_error=endings.count("api_error"),
            other=[e for e in endings if e not in ("completed", "found_finished", "refused", "api_error")],
            killed=killed,
        )


@dataclass
class CrashLoopOutcome:
    """A run restarted ``crashes`` times, each process killed at the same point."""

    crash_point: str
    tool: str
    crashes: int
    max_turns: int
    model_calls: int
    """Requests sent to the model by all the processes together."""
    killed: int
    """Processes that died at the crash point (the others stopped at the turn cap or finished)."""
    turns: int
    """The turns charged in the checkpoint at the end."""

    def to_json(self) -> str:
        """The outcome as one JSON object."""
        return json.dumps(asdict(self), indent=2)

    def story(self) -> str:
        """The outcome in plain lines."""
        return _(
            "{crashes} restarts of the {tool} run, each killed {crash_point_help}, with "
            "max_turns={max_turns}: {killed} killed, {model_calls} model calls, {turns} "
            "turns charged."
        ).format(
            crashes=self.crashes,
            tool=self.tool,
            crash_point_help=core(CRASH_POINT_HELP[self.crash_point]),
            max_turns=self.max_turns,
            killed=self.killed,
            model_calls=self.model_calls,
            turns=self.turns,
        )


class _CountingClient:
    """A client whose ``messages.create`` appends a line to ``log`` before each request is sent."""

    def __init__(self, client: Any, log: Path) -> None:
        self.messages = self
        self._create: Callable[..., Any] = client.messages.create
        self._log = log

    def create(self, **kw: Any) -> Any:
        with self._log.open("a") as f:
            f.write("request\n")
        return self._create(**kw)


def crash_loop(
    crash_point: str = "after_response",
    tool: str = "read_file",
    *,
    crashes: int = 10,
    max_turns: int = MAX_TURNS,
    root: str | Path | None = None,
) -> CrashLoopOutcome:
    """Start ``tool``'s run ``crashes`` times, each process SIGKILLed at its first ``crash_point``."""
    sc = scenario(tool)
    plan = CrashPlan(crash_point)
    with _folder(root) as where:
        box = RunFolder.create(where)
        log = Path(where) / "model-requests.log"
        log.touch()
        client = _CountingClient(make_client(), log)  # made once: the children need not import the SDK again
        endings = [
            run_in_child(lambda: box.run(sc.task, client=client, crash=plan, max_turns=max_turns))
            for _ in range(crashes)
        ]
        cp = json.loads(box.checkpoint_path.read_text()) if box.checkpoint_path.exists() else {"turns": 0}
        return CrashLoopOutcome(
            crash_point=crash_point,
            tool=tool,
            crashes=crashes,
            max_turns=max_turns,
            model_calls=len(log.read_text().splitlines()),
            killed=endings.count("killed"),
            turns=cp["turns"],
        )

"""The core's own words that the lab shows a learner, in the lab's catalog, and a lesson's sentence (:func:`say`).

The core imports no wing, so its texts (each crash point's help, each scenario's and strategy's
help, each scenario's task) cannot go through a catalog where they are written. They are copied here, marked for the
lab's catalog, and translated where the lab shows them with :func:`core`; `tests/test_korean_messages.py`
fails when the core's texts and these copies differ, so a new or changed text cannot go untranslated.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..errors import CheckpointError, Problem, ResumableError
from .i18n import LESSONS, N_, _

__all__ = ["CORE_WORDS", "core", "message", "reason", "say", "speak_in_tracebacks"]

CORE_WORDS: frozenset[str] = frozenset(
    {
        # crash.CRASH_POINT_HELP
        N_("before the model call"),
        N_("after the model's response, before save point A"),
        N_("during save point A (half a temp file on disk)"),
        N_("after save point A, before the tool runs"),
        N_("after the tool ran, before save point B"),
        N_("during save point B (half a temp file on disk)"),
        N_("between two tools of one turn (the first's result saved, the next not run)"),
        N_("after the turn's last save point B"),
        # scenarios.SCENARIOS[...].help
        N_("notes run: “Summarize this week's meeting notes” (read_file is read-only)"),
        N_("email run: “Email the team this week's conclusion” (send_email has a side effect)"),
        N_("briefing run: one turn asks for send_email, then read_file, at once (a crash can fall between them)"),
        # scenarios.SCENARIOS[...].task: the user's words to the model stay English data; a lesson
        # that announces a task shows it in the learner's language, the English beside it
        N_("Summarize this week's meeting notes into one page."),
        N_("Email the team this week's conclusion."),
        N_("Email the team this week's conclusion, and tell me what the Aug 25 retro decided."),
        # strategies.STRATEGIES[...].help, the kit's own strategies
        N_("naive resume: leave the dangling tool_use as it is (the API refuses it)"),
        N_("drop the assistant message that asked for the call (hides the fact, not the risk)"),
        N_("run the call again whatever it does (the postmortem's production code)"),
        # course.hidden.strategies.ANSWERS' help: the instructor's strategies, shown by the CLI and the simulator
        N_("the lesson's rule: re-run read-only tools; otherwise answer “status unknown”"),
        N_("by effect, plus receipts and an idempotency key the outbox dedupes on"),
        # loop.RunResult.status, tools.Effect and how a child ended: values a lesson's sentence shows
        N_("finished"),
        N_("already_finished"),
        N_("max_turns"),
        N_("read_only"),
        N_("side_effect"),
        N_("killed"),
        N_("exited"),
        # checkpoint.Checkpoint's field docstrings, whitespace joined: lesson 1's table of the fields
        N_("Format version; an older one migrates on load, any other is refused, never guessed at."),
        N_("The task this run was started for. Resume refuses a checkpoint of another task."),
        N_("Stable id of this run across crashes; with a tool_use id it makes the idempotency key."),
        N_(
            "Model calls started since the task began (not since this process began), so the cap holds. Charged on disk before each call: a process killed after the call still paid for it."
        ),
        N_(
            "Tokens billed for every recorded model call since the task began: input, output, and the prompt cache's writes and reads (``cache_creation_input_tokens``, ``cache_read_input_tokens``)."
        ),
        N_("The Messages API conversation, as JSON dicts, exactly as sent and received."),
        N_(
            "The dangling calls: the last turn's calls with no result yet, in block order. Set at save point A to every call of the reply; each save point B takes the first one off."
        ),
        N_(
            "The ``tool_result`` blocks recorded so far for the last turn, in block order, not yet sent. Filled by each save point B but the turn's last, which sends them all in one user message."
        ),
        # errors: a CheckpointError's constant reasons and templates (`reason` fills them)
        N_("no 'version' field: not a checkpoint written by this kit"),
        N_("checkpoint version {found}, this code reads version {expected}"),
        N_("checkpoint is for task {found}, not {expected}; refusing to resume it"),
        N_("at least {size} bytes, over the {limit}-byte cap; pass max_bytes= to load a larger file"),
        N_("not valid JSON ({detail})"),
        N_("not strict JSON: {detail}"),
        N_("the state contains the value of ${var}; secrets are never written"),
        N_("fencing token {token} of run {scope} is stale (token {newest} wrote here since)"),
        N_("lease token {token} was taken over (now token {newest}); stop"),
        N_("after reconcile: {problem}"),
        N_("not strict JSON: a lone surrogate escape (\\ud800-\\udfff), not a character"),
        N_("cannot read: {why} ({name})"),
        N_("cannot read ({name}): {detail}"),
        N_("{kind}, not a regular file; point the path at a checkpoint file"),
        N_("a symlink to the missing {target}; mount or fix it"),
        N_("the folder {folder} does not exist (unmounted?); create it to start a new run"),
        N_("the checkpoint's folder does not exist; is the volume mounted? (not a fresh start)"),
        N_("the state is not writable as JSON: {detail}"),
        N_("the state is not writable as strict JSON: {detail}"),
        N_("not saved, the old checkpoint is kept: {detail}"),
        N_("saved, but its folder could not be synced: {detail}"),
        N_("expected a JSON object, found {kind}"),
        N_("field {where}: {detail}"),
        N_("the run is being resumed by {holder}; wait for it or let the lease expire"),
        N_("cannot use the lease file ({detail})"),
        # what a refusal's {why}, {kind} or {detail} may be, when the kit words it
        N_("permission denied; give this user read access to it"),
        N_("a parent in the path is a file, not a folder; fix the path"),
        N_("the name is too long for the file system; use a shorter path"),
        N_("too many levels of symlinks; fix the link"),
        N_("an I/O error; check the disk"),
        N_("a directory"),
        N_("a FIFO"),
        N_("a character device"),
        N_("a block device"),
        N_("a socket"),
        N_("not a regular file"),
        N_("NaN or Infinity is not JSON, and the API refuses it"),
        N_("a number of {longest} characters, over the limit of {limit}"),
        N_("nesting {depth} levels deep, over the limit of {limit}"),
        N_("duplicate key {key} in one object"),
        N_("the number {text} is too large for a float"),
        # checkpoint.consistency_problem's problems: a core Problem keeps its template and data
        N_("messages is empty; a checkpoint holds at least the task's first user message"),
        N_("the Messages API would refuse these messages: {problem}"),
        N_("pending_tool_uses or recorded_results is set but the last message is not the assistant's tool_use turn"),
        N_("messages.{i}: last message asks for tool_use {ids} but pending_tool_uses is empty"),
        N_(
            "messages.{i}: every tool_use has a recorded result but none is pending: the results belong in one user message after the turn"
        ),
        N_(
            "messages.{i}: recorded results {recorded} then pending calls {pending} are not the last message's tool_use ids {ids}, in block order"
        ),
        N_("messages.{i}: pending_tool_uses differs from the tool_use block {id}"),
        # errors: the others a learner's cell may let escape (`message` says them, and so do tracebacks)
        N_(
            "no strategy named {name}; did you mean {close}? choose one of {choices}, or pass your own reconcile(cp, tools) function instead of a name"
        ),
        N_(
            "no strategy named {name}; choose one of {choices}, or pass your own reconcile(cp, tools) function instead of a name"
        ),
        N_(
            "reconcile={given} is not a function: pass a strategy's, e.g. rc.STRATEGIES[{close}].reconcile, or your own reconcile(cp, tools) function"
        ),
        N_(
            "reconcile={given} is not a function: pass a strategy's, rc.STRATEGIES[name].reconcile (name one of {choices}), or your own reconcile(cp, tools) function"
        ),
        N_("{name} returned None, not a Checkpoint: end it with `return cp`, the checkpoint it was given"),
        N_("{name} returned a {type}, not a Checkpoint: end it with `return cp`, the checkpoint it was given"),
        N_(
            "the checkpoint has a pending {tool} call ({id}) and no reconcile was given: pass reconcile= (a strategy's .reconcile or your own reconcile(cp, tools) function)"
        ),
        N_("no scenario exercises {key}; did you mean {close}? choose one of {choices}"),
        N_("no scenario exercises {key}; choose one of {choices}"),
        N_("unknown crash point {point}; did you mean {close}? choose one of {choices}"),
        N_("unknown crash point {point}; choose one of {choices}"),
        N_("unknown tool {name}"),
        N_("idempotency key {key} was first used with other input ({stored} != {new})"),
        N_("the crashing run was still going after {timeout} s and was killed"),
        N_("child died of signal {signal}, not SIGKILL"),
        N_("the crashing run failed before its crash point:\n{detail}"),
        N_("(no traceback)"),
    }
)
"""Every core text the lab shows, as written in the core."""


def core(text: str) -> str:
    """One of the core's texts (:data:`CORE_WORDS`, or a :class:`~resumable_core.errors.Problem` of one) in now's
    language; any other text as it is."""
    if isinstance(text, Problem) and text.template in CORE_WORDS:
        return _filled(text.template, text.data)
    return _(text) if text in CORE_WORDS else text


def _filled(template: str, data: dict[str, object]) -> str:
    # a value may be a core text itself (a Problem inside a refusal): said in now's language too
    return _(template).format(**{k: core(v) if isinstance(v, str) else v for k, v in data.items()})


def say(message: str, /, **values: object) -> str:
    """A lesson's sentence in now's language, its `{fields}` filled from `values`.

    Lessons write `print(lab.say("{n} emails sent", n=len(sent)))`: the code cell is the same in
    every edition, and the sentence comes from the lessons' catalog. A value that is one of the
    core's texts (a scenario's task) is shown in now's language too (:func:`core`).
    """
    shown = {k: core(v) if isinstance(v, str) else v for k, v in values.items()}
    return LESSONS.gettext(message).format(**shown)


def reason(error: CheckpointError) -> str:
    """A refused checkpoint's one-line reason in now's language, from the error's template and data."""
    # The core imports no catalog: its errors carry their data, and the sentence is made here.
    if error.template in CORE_WORDS:
        return _filled(error.template, error.data)
    return core(error.reason)


def message(error: BaseException) -> str:
    """Any of the core's errors in now's language, as ``str(error)`` says it in English (a refused checkpoint
    keeps its path in front); any other error's own text, and where the words are not the kit's (a tool's failure)."""
    # the learner's code may hand over any object of these classes, its template and data changed at will
    with contextlib.suppress(Exception):
        if isinstance(error, CheckpointError):
            said = reason(error)
            return f"{error.path}: {said}" if error.path else said
        if isinstance(error, ResumableError) and error.template in CORE_WORDS:
            return _filled(error.template, error.data)
    return str(error)


def _in_words(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
    # IPython's own traceback, its message in now's language. IPython ignores what this returns (9.x),
    # so it shows the traceback itself, and never raises: IPython would drop the traceback, and a test
    # cell with no error shown scores as passed. An error whose words cannot be said (a learner's
    # object changed or subclassed at will) shows as IPython says it.
    try:
        english = value.args
        value.args = (message(value),)
    except Exception:  # noqa: BLE001 - a learner's object may refuse: its traceback as IPython says it
        english = None
    try:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    finally:
        if english is not None:
            with contextlib.suppress(Exception):
                value.args = english


def speak_in_tracebacks() -> None:
    """In an IPython kernel, show a core error that escapes a cell in now's language (a Korean notebook's traceback).

    The core imports no catalog, so its exceptions carry English messages and their template with the data;
    this hook, not the core, puts them in words, at the only place a learner reads them raw.
    """
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        shell.set_custom_exc((ResumableError,), _in_words)

"""The postmortem's Part 2, the double refund, grades the learner's ``refund`` under injected timeouts
and real kills: the solution scores full, each plausible wrong answer scores lower, and the contract
the notebook states is the one the hidden module maps to checks. Grading here goes through the check
functions the notebook's test cells call (read from the source notebook, hidden blocks included),
with the notebook's points; the payment provider's own rules are tested first.
"""

from __future__ import annotations

import re
import shutil

import exercise_cells  # tests/ is on sys.path under pytest (rootdir-relative import)
import nbformat
import pytest
from exercise_cells import Exercise, failure, require_fails, text_of

import resumable_core as rc
from resumable_core.course import release as course
from resumable_core.course.checks import postmortem as checks
from resumable_core.course.checks.support import HIDDEN_SENTENCE, CheckFailed
from resumable_core.course.grading import reasons
from resumable_core.course.grading.isolation import BwrapBackend, library_copy
from resumable_core.course.grading.recheck import driver as isolated
from resumable_core.course.hidden import postmortem as hidden
from resumable_core.lab import payments

EXERCISE = Exercise.of("postmortem", setup=lambda grade_id: grade_id == "setup")
NOTEBOOK = EXERCISE.notebook
PART_2 = (
    "refund_root_cause",
    "test_refund_timeout",
    "test_refund_refused",
    "test_refund_kill",
    "test_refund_keys",
    "test_refund_hidden",
)
"""Part 2's graded cells: its written root cause and its tests."""


SOLUTION = EXERCISE.solution("refund") + "\n"
KEY = '    key = f"refund:{order_id}:{amount_cents}"  # names the logical refund: the same in every process\n'
CALL = '            return tools.execute("refund_payment", request, idempotency_key=key)\n'
REQUEST = '    request = {"order_id": order_id, "amount_cents": amount_cents}\n'
TRANSIENT = "        except (rc.ToolTimeoutError, rc.ToolUnavailableError):\n"
LOOP = "    for attempt in range(1, 6):\n"
BOUND = "            if attempt == 5:\n                raise\n"


def edited(*changes: tuple[str, str], before: str = "") -> str:
    """The solution with each (old, new) applied once, and ``before`` above it."""
    return before + exercise_cells.edited(SOLUTION, *changes)


PRODUCTION = text_of(EXERCISE.cell("refund_setup")).replace("production_refund", "refund")

WRONG: dict[str, tuple[str, str]] = {
    # (the learner's refund, the test cell it must fail)
    "production_code": (PRODUCTION, "test_refund_timeout"),
    "no_key": (edited((CALL, CALL.replace(", idempotency_key=key", ""))), "test_refund_timeout"),
    "fresh_key_per_attempt": (
        edited(
            (CALL, CALL.replace("idempotency_key=key", "idempotency_key=str(uuid.uuid4())")), before="import uuid\n"
        ),
        "test_refund_timeout",
    ),
    "gives_up_on_a_timeout": (edited((TRANSIENT, "        except rc.ToolUnavailableError:\n")), "test_refund_timeout"),
    "retries_a_refusal": (edited((TRANSIENT, "        except rc.ToolError:\n")), "test_refund_refused"),
    "a_key_per_call": (edited((KEY, "    key = str(uuid.uuid4())\n"), before="import uuid\n"), "test_refund_kill"),
    "a_key_per_process": (
        edited((KEY, "    key = PROCESS_KEY\n"), before="import uuid\nPROCESS_KEY = str(uuid.uuid4())\n"),
        "test_refund_keys",
    ),
    "unbounded_retries": (
        edited(
            (LOOP, "    for attempt in itertools.count(1):\n"),
            (BOUND, "            continue\n"),
            before="import itertools\n",
        ),
        "test_refund_hidden",
    ),
    "a_key_per_order": (edited((KEY, '    key = f"refund:{order_id}"\n')), "test_refund_hidden"),
    "a_key_per_amount": (edited((KEY, '    key = f"refund:{amount_cents}"\n')), "test_refund_hidden"),  # red team
    # a refused refund that never reached the provider: the tool refuses the input, or refund refuses itself
    "a_wrong_argument_name": (
        edited((REQUEST, REQUEST.replace('"amount_cents":', '"amount":'))),
        "test_refund_refused",
    ),
    "refuses_unasked": (
        "def refund(tools, order_id, amount_cents):\n    raise rc.ToolError('refused')\n",
        "test_refund_refused",
    ),
    "returns_a_sentence_not_the_id": (
        edited((CALL, CALL.replace("return ", "") + '            return "refunded"\n')),
        "test_refund_timeout",
    ),
}

SALTED = edited(
    (KEY, '    key = f"{_RUN}-{order_id}-{amount_cents}"  # stable within a process only\n'),
    before="import uuid\n_RUN = uuid.uuid4().hex  # module level: one per process\n",
)
"""A key salted with a value drawn once per process: a forked retry keeps it, a restarted harness draws another."""
RESTART_CELLS = {"test_refund_kill", "test_refund_hidden"}
"""The cells whose checks call ``refund`` again as a restarted harness would (``checks.support.restarted``)."""


learner = EXERCISE.learner
graded_cells = EXERCISE.graded_cells


# -- the provider ------------------------------------------------------------------------------------


def test_the_provider_honours_a_key_as_stripe_does(tmp_path):
    """The same key and parameters return the first refund's id; other parameters under it are refused."""
    provider, _ = payments.shop(tmp_path / "w", {"A": 1000})
    assert provider.refund("A", 400, "k1") == ("re_000001", True)
    assert provider.refund("A", 400, "k1") == ("re_000001", False)
    with pytest.raises(rc.IdempotencyConflictError):
        provider.refund("A", 300, "k1")
    assert provider.refund("A", 400) == ("re_000002", True)  # no key: a new refund every time
    assert [r["id"] for r in provider.refunds()] == ["re_000001", "re_000002"]


def test_the_provider_refuses_more_than_is_left_of_the_charge(tmp_path):
    """An unknown order, a refund over what is left and a non-positive amount are ToolErrors; nothing is refunded."""
    provider, _ = payments.shop(tmp_path / "w", {"A": 1000})
    provider.refund("A", 600, "k1")
    for order, amount in (("B", 1), ("A", 401), ("A", 0)):
        with pytest.raises(rc.ToolError, match="refused"):
            provider.refund(order, amount, f"k-{order}-{amount}")
    assert len(provider.refunds()) == 1


def test_the_tools_faults_come_in_order_and_the_book_logs_each_request(tmp_path):
    """A timeout refunds and raises, an outage raises first; every request is logged with its key and outcome."""
    faults = [payments.Fault.UNAVAILABLE, payments.Fault.TIMEOUT]
    provider, tools = payments.shop(tmp_path / "w", {"A": 1000}, payments.refund_tool(faults))
    request = {"order_id": "A", "amount_cents": 1000}
    with pytest.raises(rc.ToolUnavailableError):
        tools.execute("refund_payment", request, idempotency_key="k")
    assert provider.refunds() == []
    with pytest.raises(rc.ToolTimeoutError):
        tools.execute("refund_payment", request, idempotency_key="k")
    assert tools.execute("refund_payment", request, idempotency_key="k") == "re_000001"
    assert [r["outcome"] for r in provider.requests()] == ["unavailable", "timeout", "refunded"]
    assert {r["idempotency_key"] for r in provider.requests()} == {"k"} and len(provider.refunds()) == 1


def test_the_toolbox_hands_the_key_to_a_tool_without_a_ledger(tmp_path):
    """Without a ledger the key still reaches the tool (the provider dedupes on it); without a key, nothing does."""
    world = rc.World.create(tmp_path / "w")
    box = rc.Toolbox(world)
    mail = {"to": "a@example.com", "subject": "s", "body": "b"}
    box.execute("send_email", mail, idempotency_key="run:toolu_1")
    box.execute("send_email", mail, idempotency_key="run:toolu_1")
    box.execute("send_email", mail)
    assert [e["idempotency_key"] for e in world.sent_emails()] == ["run:toolu_1", None]


@pytest.mark.slow
def test_the_loop_sends_no_key_without_a_ledger(tmp_path):
    """The loop keys a side effect only when it keeps receipts: without a ledger the outbox row has no key."""
    plain = rc.RunFolder.create(tmp_path / "plain")
    plain.run(rc.SCENARIOS["send_email"].task)
    assert [e["idempotency_key"] for e in plain.world.sent_emails()] == [None]
    keyed = rc.RunFolder.create(tmp_path / "keyed", ledger=True)
    keyed.run(rc.SCENARIOS["send_email"].task)
    assert [e["idempotency_key"] is not None for e in keyed.world.sent_emails()] == [True]


# -- the notebook --------------------------------------------------------------------------------------


def test_the_contract_is_the_notebooks_and_every_rule_has_a_called_check():
    """The hidden CONTRACT's keys are the exercise's contract bullets, and each check it names is called by a test cell."""
    text = text_of(EXERCISE.cell("refund_prompt"))
    contract = text.split("**The contract.**\n", 1)[1]
    bullets = [line[2:] for line in contract.strip().splitlines() if line.startswith("- ")]
    assert bullets == list(hidden.CONTRACT)
    called = {call.check.__name__ for _, calls in graded_cells().values() for call in calls}
    for rule, names in hidden.CONTRACT.items():
        assert names, rule
        assert set(names) <= called, (rule, set(names) - called)


def test_part_2_and_its_root_cause_carry_most_of_the_points():
    """Part 2 (its written root cause and its tests) is more than half the assignment's points."""
    points = {c["grade_id"]: c["points"] for c in course.grade_cells(NOTEBOOK)}
    assert sum(points[gid] for gid in PART_2) * 2 > sum(points.values())


@pytest.mark.slow
def test_the_solution_scores_full_under_kills_and_timeouts():
    """The notebook's own refund passes every Part 2 test cell, visible and hidden."""
    ns = learner(SOLUTION)
    cells = {gid: calls for gid, (_, calls) in graded_cells().items() if gid in PART_2}
    assert set(cells) == set(PART_2) - {"refund_root_cause"}
    failed = {gid: why for gid, calls in cells.items() if (why := failure(calls, ns))}
    assert failed == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_refund_scores_lower(name):
    """Each plausible wrong answer fails the test cell its bug breaks, with a message about that bug."""
    source, cell = WRONG[name]
    require_fails(name, cell, graded_cells(), learner(source))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_isolated_recheck_fails_a_key_per_call_and_a_retried_refusal(tmp_path):
    """In the sandboxed re-check (the learner's refund behind the boundary), each bug fails its own cell there too."""
    source = course.notebook_path("postmortem")
    backend = BwrapBackend(library_copy(tmp_path / "lib"))
    bugs = {"a_key_per_call": "test_refund_kill", "retries_a_refusal": "test_refund_refused"}
    for name, cell in bugs.items():
        nb = nbformat.read(str(source), as_version=4)
        answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "refund")
        answer.source = WRONG[name][0]
        path = tmp_path / f"{name}.ipynb"
        nbformat.write(nb, str(path))
        report = isolated.run(path, "postmortem", backend=backend, source=source, timeout=60)
        failed = {gid for gid, why in report.items() if why}
        assert cell in failed and not failed & {"test_incident", "test_read_file_rerun"}, (name, dict(report))


def _submission(tmp_path, name: str, answer: str):
    """The source notebook with ``answer`` as the learner's refund cell, written as a submission."""
    nb = nbformat.read(str(course.notebook_path("postmortem")), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "refund")
    cell.source = answer
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_cell_failed_only_after_a_fresh_start_is_not_called_a_patch():
    """A visible check's failure after a fresh start keeps the check's words, names no check and cries no patching."""
    worded = reasons.visible_check_disagreed(reasons.failed_after_restart("the customer was refunded 2 times"))
    assert worded.endswith(": the customer was refunded 2 times") and "check_" not in worded
    assert "freshly started process" in worded and "patch" not in worded and "needs review" not in worded
    assert "may patch the checks" in reasons.visible_check_disagreed("the customer was refunded 2 times")


def test_a_refund_that_raises_its_own_error_is_pointed_to_the_contract():
    """A refund that raises what is no provider's outcome (a wrong tool name, a JSON parse) is told to reread the contract."""

    raised = checks.Call("raised", kind="a refusal", error="UnknownToolError: unknown tool 'refund'")
    with pytest.raises(
        checks.CheckFailed, match=r"unknown tool 'refund' \(reread Part 2's contract: call the refund_pay"
    ):
        checks.require_one_refund(checks.Shop.open(), raised, "here")


def test_a_refusal_that_never_reached_the_provider_is_pointed_to_the_contract(monkeypatch):
    """A permanent refusal must be the provider's answer to one request: an error refund raised before sending any
    (the tool refusing a wrong argument name, a refusal refund made up) fails, quoting it and naming the contract,
    in the learner's language."""
    wrong_argument = "ToolError: refund_payment failed: refund_payment() missing 1 required positional argument"
    for error in (wrong_argument, "ToolError: refused"):
        raised = checks.Call("raised", kind="a refusal", error=error)
        with pytest.raises(checks.CheckFailed, match=r"before any request reached the provider") as caught:
            checks.require_permanent(checks.Shop.open(), raised, "here", "a refusal")
        assert error in caught.value.reason and "reread Part 2's contract" in caught.value.reason
    monkeypatch.setenv("RESUMABLE_LANG", "ko")
    with pytest.raises(checks.CheckFailed) as caught:
        checks.require_permanent(checks.Shop.open(), raised, "here", "a refusal")
    assert caught.value.reason.startswith(
        "here: 요청이 결제 대행사에 닿기도 전에 refund가 예외를 일으켰습니다(“ToolError"
    )


@pytest.mark.slow
def test_a_restarted_call_that_returns_the_id_unasked_fails_after_the_restart():
    """A restarted call's id returned without a request to the provider is a guess: it fails, named as after a restart;
    the solution's retry (one request under the killed call's key) passes."""
    from resumable_core.course.checks.support import FailedAfterRestart

    refund = learner(SOLUTION)["refund"]
    shop = checks.Shop.open()
    assert shop.call(refund, die_after_refund=True).ended == "killed"
    sent = len(shop.requests())
    refund_id = shop.refunds()[0]["id"]
    guessed = checks.Call("returned", value=refund_id, returned="str")
    with pytest.raises(FailedAfterRestart, match="without sending a request"):
        checks.require_one_refund_after_restart(shop, guessed, "here", sent_before=sent)
    again = shop.call(refund)
    assert checks.require_one_refund_after_restart(shop, again, "here", sent_before=sent) == refund_id


@pytest.mark.slow
def test_a_per_process_salt_passes_only_where_the_restart_is_a_fork():
    """In the kernel (a forked retry) the per-process salt passes every Part 2 cell: only a fresh process can tell."""
    ns = learner(SALTED)
    cells = {gid: calls for gid, (_, calls) in graded_cells().items() if gid in PART_2}
    assert {gid: why for gid, calls in cells.items() if (why := failure(calls, ns))} == {}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_isolated_recheck_restarts_the_learners_process_for_the_retry(tmp_path):
    """In the sandboxed re-check the retry after the kill runs in a freshly started process: the salt pays twice."""
    source = course.notebook_path("postmortem")
    backend = BwrapBackend(library_copy(tmp_path / "lib"))
    report = isolated.run(
        _submission(tmp_path, "salted", SALTED), "postmortem", backend=backend, source=source, timeout=60
    )
    failed = {gid: why for gid, why in report.items() if why}
    assert set(failed) == RESTART_CELLS, dict(report)
    kill = failed["test_refund_kill"]  # a visible check: its words after the restart, no check's name
    assert kill.startswith(reasons.AFTER_RESTART) and "refunded 2 times" in kill and "check_" not in kill, kill
    assert "patches" not in reasons.visible_check_disagreed(kill)
    assert (
        failed["test_refund_hidden"] == getattr(hidden.check_refund_kill_then_timeout, HIDDEN_SENTENCE)()
    )  # its sentence alone


NO_OUTAGE_RETRY = edited((TRANSIENT, "        except rc.ToolTimeoutError:\n"))
"""The solution, but an unavailable provider is raised at once, not retried."""


@pytest.mark.parametrize(
    ("source", "check", "where"),
    [
        (WRONG["a_key_per_order"][0], checks.check_two_refunds, "lesson 3, section 5"),
        (NO_OUTAGE_RETRY, checks.check_refund_after_timeout, "lesson 4, section 2"),
        (
            edited((KEY, '    key = f"refund:{order_id}"\n'), (TRANSIENT, "        except rc.ToolTimeoutError:\n")),
            checks.check_refund_after_timeout,
            "lesson 4, section 2",
        ),
    ],
    ids=["a_key_per_order", "no_retry_on_outages", "both"],
)
def test_a_key_per_order_or_no_retry_on_outages_fails_a_visible_check(source, check, where):
    """A key from order_id alone, or an outage not retried, fails a visible check naming the section to reread."""
    with pytest.raises(CheckFailed, match=re.escape(where)):
        check(learner(source)["refund"])


def test_the_solution_passes_the_extended_visible_refund_checks():
    """The worked refund passes the visible checks the outage and the second amount joined."""
    checks.check_refund_after_timeout(learner(SOLUTION)["refund"])
    checks.check_two_refunds(learner(SOLUTION)["refund"])

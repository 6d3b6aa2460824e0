"""crash.py: real SIGKILL crashes in a forked child, at named points."""

from __future__ import annotations

import os
import threading
import warnings

import pytest

import resumable_core as rc
from resumable_core.crash import CRASH_POINTS, kill_self, run_in_child


def test_kill_self_is_a_real_sigkill(tmp_path):
    """The child dies of SIGKILL: no finally block, no exit handler runs."""
    marker = tmp_path / "finally-ran"

    def body():
        try:
            kill_self()
        finally:
            marker.write_text("x")

    assert run_in_child(body) == "killed"
    assert not marker.exists()


def test_a_child_that_returns_is_reported_exited(tmp_path):
    """A child that ends normally is 'exited', and the caller keeps running."""
    assert run_in_child(lambda: None) == "exited"


def test_a_child_that_fails_raises_with_its_traceback(tmp_path):
    """A child that raises is reported as a CrashError carrying the child's traceback."""
    with pytest.raises(rc.CrashError, match="ZeroDivisionError"):
        run_in_child(lambda: 1 / 0)


def test_fn_runs_in_another_process_that_is_reaped(tmp_path):
    """fn runs in a child of its own: it changes none of the caller's memory, and its pid is reaped."""
    changed_in_fn: list[int] = []
    pid_file = tmp_path / "pid"

    def body():
        changed_in_fn.append(os.getpid())
        pid_file.write_text(str(os.getpid()))
        kill_self()

    assert run_in_child(body) == "killed"
    child = int(pid_file.read_text())
    assert changed_in_fn == [] and child != os.getpid()
    with pytest.raises(ChildProcessError):  # already waited for: no zombie is left behind
        os.waitpid(child, os.WNOHANG)


def test_forking_with_a_thread_running_is_silent(capfd):
    """With another thread alive (as in every Jupyter kernel) run_in_child warns nothing, on 3.12+ too."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        # recorded, not turned into errors: CPython drops a fork warning that a filter makes an error
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert run_in_child(lambda: None) == "exited"
            assert run_in_child(kill_self) == "killed"
    finally:
        stop.set()
        thread.join()
    assert [str(w.message) for w in caught] == []
    assert capfd.readouterr().err == ""


def test_crash_points_are_every_boundary_in_order():
    """Seven named points, from before the model call to after save point B."""
    assert CRASH_POINTS == (
        "before_model_call",
        "after_response",
        "during_save_a",
        "after_save_a",
        "after_tool",
        "during_save_b",
        "between_tools",
        "after_save_b",
    )


def test_plan_matches_point_turn_and_tool():
    """A plan fires only at its point, on its turn, for its tool."""
    plan = rc.CrashPlan("after_tool", tool="send_email", turn=2)
    assert plan.matches("after_tool", 2, "send_email")
    assert not plan.matches("after_tool", 1, "send_email")
    assert not plan.matches("after_tool", 2, "read_file")
    assert not plan.matches("after_save_b", 2, "send_email")
    with pytest.raises(ValueError, match="unknown crash point"):
        rc.CrashPlan("sometime")

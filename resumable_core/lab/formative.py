"""Formative checks: choose the resume action for practice checkpoints D, E and F, and hear why.

The graded checkpoints A, B and C stay without feedback (their answers are graded, hidden);
these three were crashed at other points and tools, so practising on them gives nothing away.
Output goes to stdout only, and a blank or unknown answer is explained, never raised.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from .exercise_checkpoints import ACTIONS, FORMATIVE
from .i18n import N_, _

__all__ = ["RIGHT_ACTIONS", "formative_check"]

_DANGLING = N_(
    "a tool_use with no tool_result after it is pending: the run is not finished, and the Messages API "
    "answers 400 to a conversation that leaves a tool_use unanswered."
)
_NOT_FINISHED = N_("a finished run ends with the assistant's plain reply and nothing pending; ")

RIGHT_ACTIONS: MappingProxyType[str, tuple[str, str]] = MappingProxyType(
    {
        "D": (
            "is_error_fallback",
            N_(
                "send_email is pending and has a side effect. Here it never ran, but a run killed just after the "
                "email went out leaves the very same file (the kill came before save point B): the file cannot "
                "say which, so the resume records 'status unknown' and the model checks the outbox before sending."
            ),
        ),
        "E": (
            "rerun_tool",
            N_(
                "the kill came during save B, and an interrupted atomic save leaves the previous file: save A's, "
                "with list_dir pending. list_dir is read-only, so running it again is harmless and answers the call."
            ),
        ),
        "F": (
            "call_model",
            N_(
                "the kill came during save A of the final answer, so the answer never reached the disk: the file is "
                "the one saved before that model call (the turn already counted), ending with a tool_result, nothing "
                "pending. The next model call is due."
            ),
        ),
    }
)
"""Each practice checkpoint's right action and why."""

_MISREAD: MappingProxyType[str, MappingProxyType[str, tuple[str, ...]]] = MappingProxyType(
    {
        "D": MappingProxyType(
            {
                "finished_no_call": (_NOT_FINISHED, N_("this one ends with a request for send_email. "), _DANGLING),
                "call_model": (_DANGLING,),
                "rerun_tool": (
                    N_(
                        "send_email has a side effect (tools.effect('send_email')). The file is the same "
                        "whether the email went out or not: re-running sends a duplicate when it did."
                    ),
                ),
                "delete_call": (
                    N_(
                        "dropping the request hides it from the model: if the email did go out, nothing "
                        "says so any more, and the model sends it again."
                    ),
                ),
            }
        ),
        "E": MappingProxyType(
            {
                "finished_no_call": (_NOT_FINISHED, N_("this one ends with a request for list_dir. "), _DANGLING),
                "call_model": (
                    N_(
                        "the crash came during save B, but a half-done atomic save never replaces the file: "
                        "what is on disk is save A's. "
                    ),
                    _DANGLING,
                ),
                "is_error_fallback": (
                    N_(
                        "list_dir is read-only (tools.is_read_only('list_dir')): running it again "
                        "changes nothing, so the model can have its real result. is_error is for calls that may have "
                        "had an effect."
                    ),
                ),
                "delete_call": (
                    N_(
                        "list_dir is safe to run again; dropping the request throws the model's turn "
                        "away, and it spends another model call asking for the same thing."
                    ),
                ),
            }
        ),
        "F": MappingProxyType(
            {
                "finished_no_call": (
                    _NOT_FINISHED,
                    N_(
                        "this one ends with the user's tool_result: the final "
                        "answer was lost with the process (the kill came during save A)."
                    ),
                ),
                "rerun_tool": (
                    N_(
                        "nothing is pending (pending_tool_use is None): every tool_use already has its "
                        "tool_result, so there is no tool to run again."
                    ),
                ),
                "is_error_fallback": (
                    N_(
                        "nothing is pending (pending_tool_use is None): no call has an unknown "
                        "status, so there is nothing to answer with is_error."
                    ),
                ),
                "delete_call": (
                    N_(
                        "nothing is pending: there is no dangling request to drop, and dropping the last "
                        "one would throw away a result the model needs."
                    ),
                ),
            }
        ),
    }
)
"""For each practice checkpoint and wrong action: what that answer misread."""


def formative_check(name: str, action: Any) -> bool:
    """Print whether ``action`` is the right resume action for practice checkpoint ``name``, and why.

    ``name`` is ``"D"``, ``"E"`` or ``"F"`` (a ValueError names them otherwise); ``action`` one
    of :data:`~resumable_core.lab.exercise_checkpoints.ACTIONS`. True when it is right.
    """
    key = name.upper() if isinstance(name, str) else name
    if key not in FORMATIVE:
        raise ValueError(
            _("formative checks are on checkpoints {names}, not {name}").format(
                names=", ".join(FORMATIVE), name=repr(name)
            )
        )
    right, why = RIGHT_ACTIONS[key]
    choices = ", ".join(ACTIONS)
    if action is None or action is Ellipsis:
        print(_("Checkpoint {name}: no answer written yet. Choose one of {choices}.").format(name=key, choices=choices))
        return False
    if not (isinstance(action, str) and action in ACTIONS):
        print(
            _("Checkpoint {name}: {action} is not an action. Choose one of {choices}.").format(
                name=key, action=repr(action), choices=choices
            )
        )
        return False
    if action == right:
        print(_("Checkpoint {name}: right, {action}. Because {why}").format(name=key, action=right, why=_(why)))
        return True
    misread = "".join(_(part) for part in _MISREAD[key][action])
    print(
        _("Checkpoint {name}: not {action}. It misreads the file: {why}").format(name=key, action=action, why=misread)
    )
    return False

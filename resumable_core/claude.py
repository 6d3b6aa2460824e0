"""Where the model calls go: live Claude when asked for, else the scripted Claude.

``anthropic`` is imported on first use, so ``import resumable_core`` stays fast.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import anthropic

    from ._scripted import ScriptedClaude

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The one place the model id lives. Override with $RESUMABLE_MODEL."""
MODEL_ENV = "RESUMABLE_MODEL"
LIVE_ENV = "RESUMABLE_LIVE"
MAX_TOKENS = 1024
SCRIPTED_BASE_URL = "http://scripted-claude.invalid"


def model_id() -> str:
    """The model to call: $RESUMABLE_MODEL, or DEFAULT_MODEL."""
    return os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def live_enabled() -> bool:
    """Live Claude is opt-in: $RESUMABLE_LIVE=1 and $ANTHROPIC_API_KEY both set."""
    return os.environ.get(LIVE_ENV) == "1" and bool(os.environ.get("ANTHROPIC_API_KEY"))


def make_client(*, live: bool | None = None, scripted: ScriptedClaude | None = None) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` client: live when enabled, else the scripted Claude.

    The scripted Claude sits behind the SDK's HTTP transport: the SDK builds, sends
    and parses real HTTP, and a 400 becomes a real ``anthropic.BadRequestError``.
    Pass ``scripted`` to keep a handle on it (its ``requests`` list records every request).
    """
    import anthropic

    if live is None:
        live = live_enabled()
    if live:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise RuntimeError("live Claude needs $ANTHROPIC_API_KEY")
        return anthropic.Anthropic(max_retries=2)
    import httpx2

    from ._scripted import ScriptedClaude

    http = httpx2.Client(transport=httpx2.MockTransport((scripted or ScriptedClaude()).handle))
    return anthropic.Anthropic(api_key="scripted-offline", base_url=SCRIPTED_BASE_URL, http_client=http, max_retries=0)


def __getattr__(name: str) -> object:
    # ScriptedClaude is public here, loaded on first use like anthropic itself.
    if name == "ScriptedClaude":
        from ._scripted import ScriptedClaude

        return ScriptedClaude
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

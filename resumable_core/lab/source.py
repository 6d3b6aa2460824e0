"""A function's real source as a lesson prints it: whole, numbered, its docstring left out, as code.

Whatever a lesson shows as it is (source, a model's reply, the API's words) is printed as a fenced
block (:func:`verbatim`): code and quoted data, not prose for a translator.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any


def source_listing(fn: Callable[..., Any]) -> str:
    """``fn``'s source as the library runs it, lines numbered, without its docstring (read from the file)."""
    lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
    node = ast.parse("\n".join(lines)).body[0]
    body = getattr(node, "body", [])
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        # ast line numbers are 1-based and end_lineno is inclusive
        del lines[first.lineno - 1 : first.end_lineno]
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}}  {line}" for i, line in enumerate(lines, start=1))


FENCE = "```"


def verbatim(text: str) -> None:
    """Print ``text`` as it is, between two fence lines (stdout only)."""
    print(f"{FENCE}\n{text.rstrip()}\n{FENCE}")


def show_source(fn: Callable[..., Any]) -> None:
    """Print :func:`source_listing` of ``fn`` as a :func:`verbatim` block."""
    verbatim(source_listing(fn))

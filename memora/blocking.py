"""The one place where blocking work (Chroma, the local embedding model) leaves the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


async def run_blocking(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a blocking call in a worker thread so the event loop keeps serving other chats."""
    return await asyncio.to_thread(fn, *args, **kwargs)

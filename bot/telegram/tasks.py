"""Stopping a background task from inside another one, without eating our own cancellation.

`task.cancel()` then `await task` under `suppress(CancelledError)` swallows the CancelledError
meant for the caller when the caller is cancelled while it waits: the caller then runs on (a
sender loop that never stops, a shutdown that hangs). asyncio has no helper for this."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until it has finished; a cancellation of the caller meanwhile
    still reaches the caller."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise

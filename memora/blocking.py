"""The one place where blocking work (Chroma, the local embedding model) leaves the event loop.

Two lanes. A reply's blocking calls (embedding the learner's message to search their memories)
go to asyncio's default thread pool, as before. Work after the reply (extraction: embedding and
storing new memories) runs in `background()`: its blocking calls go, one at a time, to a single
thread of their own. However much after-reply work a burst of messages leaves behind, it holds
at most that one thread, so a reply's call never queues behind it in the shared pool (a burst
of 100 chats queued up to 100 extractions' embeddings and Chroma writes ahead of the next
reply's search), and it takes at most one core from the replies.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

BACKGROUND_THREAD = "memora-background"
_in_background: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "memora_background", default=False
)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _background_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=BACKGROUND_THREAD)
        return _pool


@contextmanager
def background() -> Iterator[None]:
    """Within this block (in this task, and tasks it starts), blocking calls take the
    background lane."""
    token = _in_background.set(True)
    try:
        yield
    finally:
        _in_background.reset(token)


def in_background() -> bool:
    """Whether blocking calls made here take the background lane."""
    return _in_background.get()


async def run_blocking(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a blocking call in a worker thread so the event loop keeps serving other chats."""
    if not _in_background.get():
        return await asyncio.to_thread(fn, *args, **kwargs)
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_background_pool(), call)

"""cancel_and_wait: stopping a background task never eats the caller's own cancellation (a
sender loop that swallowed it ran on and hung a shutdown under load)."""

from __future__ import annotations

import asyncio
import contextlib

from bot.telegram.tasks import cancel_and_wait


async def slow_to_stop(stopping: asyncio.Event) -> None:
    """A task that takes a moment to finish once cancelled (a lease released over the network)."""
    try:
        await asyncio.Event().wait()
    finally:
        stopping.set()
        await asyncio.sleep(0.05)


async def test_the_caller_cancelled_while_it_waits_is_still_cancelled() -> None:
    stopping = asyncio.Event()
    child = asyncio.create_task(slow_to_stop(stopping))
    await asyncio.sleep(0)
    ran_on: list[str] = []

    async def caller() -> None:
        await cancel_and_wait(child)
        ran_on.append("after the wait")

    outer = asyncio.create_task(caller())
    await stopping.wait()  # the child is finishing; the caller waits for it
    outer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await outer
    assert outer.cancelled() and ran_on == []
    assert child.cancelled()


async def test_the_child_is_stopped_and_waited_for() -> None:
    stopping = asyncio.Event()
    child = asyncio.create_task(slow_to_stop(stopping))
    await asyncio.sleep(0)
    await cancel_and_wait(child)  # no CancelledError reaches a caller nobody cancelled
    assert child.done() and child.cancelled() and stopping.is_set()


async def test_a_finished_task_is_fine() -> None:
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await cancel_and_wait(done)
    assert done.done() and not done.cancelled()

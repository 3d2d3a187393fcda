"""Telegram's send budget, spent on replies first.

PTB's AIORateLimiter (aiolimiter underneath) is kept, with two changes that matter under load:

- the bot-wide budget is spread evenly, one request every 1/29 s, instead of a bucket of 30 a
  second: a full bucket lets 30 requests out at once and then 30 more within the same second
  (41 were seen in one second), over Telegram's ~30 messages a second;
- "typing…" yields to replies: a chat action is sent only when the budget has room at that
  moment, and otherwise skipped, never queued. It is a courtesy that lasts 5 seconds; under load
  it would take half the budget (one per turn, besides the reply) and double the time to answer
  everyone. When the bot is quiet every chat still sees it;
- a streamed reply's drafts are not messages (Bot API 9 `sendMessageDraft`, made for streaming):
  they go out at once, outside the message budget, at most one a second per reply
  (streaming.DRAFT_EVERY). A 429 on one only stops that reply's preview; the reply still goes;
- replicas share the bot's budget: Telegram counts messages per bot token, not per process, so
  with `share` (the number of live replicas, from their heartbeats in the shared store) each
  replica spends 1/n of it. An even split, not a shared bucket: a replica whose chats are quiet
  leaves its share unused, which costs throughput only when the load is uneven, and needs no
  round trip to the store per message.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from aiolimiter import AsyncLimiter
from telegram.ext import AIORateLimiter

JSONDict = dict[str, Any]
Result = bool | JSONDict | list[JSONDict]

SENDS_PER_SECOND = 29  # just under Telegram's ~30 messages a second for one bot
TYPING = "sendChatAction"
DRAFT = "sendMessageDraft"


class ReplyFirstRateLimiter(AIORateLimiter):
    """AIORateLimiter with an evenly spread budget in which chat actions and drafts never wait."""

    def __init__(self, max_retries: int = 3) -> None:
        super().__init__(
            overall_max_rate=1, overall_time_period=1 / SENDS_PER_SECOND, max_retries=max_retries
        )
        self.share: Callable[[], int] = lambda: 1  # replicas spending the bot's budget
        self._shared_by = 1

    @property
    def per_second(self) -> float:
        """This process's budget: the bot's, divided among the live replicas."""
        return SENDS_PER_SECOND / self._shared_by

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Result]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Result:
        self._follow_share()
        if endpoint == DRAFT:
            return await callback(*args, **kwargs)
        if endpoint == TYPING and not self._has_room():
            return True  # what Telegram answers to a chat action: nothing else to report
        return await super().process_request(
            callback, args, kwargs, endpoint, data, rate_limit_args
        )

    def _follow_share(self) -> None:
        """One request every n/29 s when n replicas share the bot (a new limiter when n changes;
        requests already waiting finish on the old one)."""
        replicas = max(1, self.share())
        if replicas != self._shared_by:
            self._shared_by = replicas
            self._base_limiter = AsyncLimiter(1, replicas / SENDS_PER_SECOND)

    def _has_room(self) -> bool:
        """Whether a request now would go out at once (nobody waiting for the budget)."""
        limiter = self._base_limiter
        return limiter is None or limiter.has_capacity()

"""What each learner spends, the operator's limits on it, and its estimated cost.

Every model call a learner's turn causes (the reply, the summary folds, the after-reply
extraction, a voice note's transcription, embeddings from a provider) is counted per learner,
per UTC day, per kind and per model in the `usage` table, in the same store as everything else:
it survives restarts, and replicas on one PostgreSQL add to one count. `/reset` does not clear
it (it is not the conversation); `/forgetme` does, with the rest of the learner's data.

`[limits]` caps a learner's tokens (input + output of every call) and voice seconds per day and
per month (UTC); 0 is no cap, admins are exempt. The check runs before the reply's model call:
a learner over a cap gets one message saying when it resets, and nothing is stored or sent.
`[pricing]` gives prices per model (per 1M input and output tokens, per audio minute); the cost
is an estimate from those prices, which the operator keeps true (none is built in).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from memora.clock import as_utc
from memora.config import LimitsConfig, PricingConfig

__all__ = [
    "Call",
    "LearnerUsage",
    "Spent",
    "cost",
    "month_start",
    "over_limit",
]

KINDS = ("reply", "summary", "extraction", "transcription", "embedding")


@dataclass(frozen=True)
class Call:
    """One model call's usage, as counted for a learner."""

    kind: str  # one of KINDS
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    audio_seconds: float = 0.0

    @property
    def empty(self) -> bool:
        return not (self.input_tokens or self.output_tokens or self.audio_seconds)


@dataclass(frozen=True)
class Spent:
    """A learner's usage over a period: tokens (input + output, every kind) and voice seconds."""

    tokens: int = 0
    voice_seconds: float = 0.0


def month_start(now: datetime) -> datetime:
    day = as_utc(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return day.replace(day=1)


def _next_month(now: datetime) -> datetime:
    start = month_start(now)
    return (start + timedelta(days=32)).replace(day=1)


def over_limit(limits: LimitsConfig, today: Spent, month: Spent, now: datetime) -> str | None:
    """Why the learner may not send another message now, and when that ends; None if they may."""
    now = as_utc(now)
    tomorrow = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    checks = (
        (limits.daily_tokens, today.tokens, "today's", tomorrow),
        (limits.daily_voice_seconds, today.voice_seconds, "today's voice", tomorrow),
        (limits.monthly_tokens, month.tokens, "this month's", _next_month(now)),
        (limits.monthly_voice_seconds, month.voice_seconds, "this month's voice", _next_month(now)),
    )
    for cap, spent, what, resets in checks:
        if cap and spent >= cap:
            return (
                f"You have used {what} allowance on this bot, so I can't answer until it resets "
                f"on {resets:%Y-%m-%d} at {resets:%H:%M} UTC. Nothing was saved."
            )
    return None


@dataclass(frozen=True)
class LearnerUsage:
    """One learner's usage over a report's days: what `/usage` and `memora usage` list."""

    user_id: int
    name: str
    turns: int
    tokens: dict[str, int]  # by kind: input + output
    voice_seconds: float
    calls: Sequence[Call]  # summed per (kind, model): what the cost is computed from

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens.values())


def cost(pricing: PricingConfig, calls: Sequence[Call]) -> float | None:
    """The estimated cost of these calls at the configured prices; None when a model they used
    has no price (the report says which)."""
    total = 0.0
    for call in calls:
        price = pricing.models.get(call.model)
        if price is None:
            if call.empty:
                continue
            return None
        total += call.input_tokens / 1e6 * price.input + call.output_tokens / 1e6 * price.output
        total += call.audio_seconds / 60 * price.audio_minute
    return total


def unpriced(pricing: PricingConfig, calls: Sequence[Call]) -> list[str]:
    """The models these calls used that `[pricing]` has no price for."""
    return sorted({c.model for c in calls if c.model not in pricing.models and not c.empty})

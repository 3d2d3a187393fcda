"""What each learner spends, the operator's limits on it, and its estimated cost.

Every model call a learner's turn causes (the reply, the summary folds, the after-reply
extraction, a voice note's transcription, embeddings from a provider) is counted per learner,
per UTC day, per kind and per model in the `usage` table, in the same store as everything else:
it survives restarts, and replicas on one PostgreSQL add to one count. `/reset` does not clear
it (it is not the conversation); `/forgetme` does, with the rest of the learner's data.

`[limits]` caps a learner's tokens (input + output of every call) and voice seconds per day and
per month (UTC); 0 is no cap, admins are exempt. The check runs before the reply's model call:
a learner over a cap gets one message saying when it resets, and nothing is stored or sent.
`[pricing]` gives prices per model (per 1M input, cached input and output tokens, per audio
minute); the cost is an estimate from those prices, which the operator keeps true (none is built
in). The ledger keeps what the provider reported of each call's input as served from its prompt
cache (billed at the cached price) and of its output as reasoning (billed as output).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memora.clock import as_utc
from memora.config import LimitsConfig, PricingConfig
from memora.i18n import N_, _, ngettext
from memora.llm import Usage
from memora.storage import Database
from memora.storage.ledger import LedgerEntry

__all__ = [
    "Call",
    "DayUsage",
    "LearnerUsage",
    "Metering",
    "Spent",
    "UsageLedger",
    "cost",
    "month_start",
    "over_limit",
]

log = logging.getLogger(__name__)

KINDS = ("reply", "summary", "extraction", "transcription", "embedding")


@dataclass(frozen=True)
class Call:
    """One model call's usage, as counted for a learner."""

    kind: str  # one of KINDS
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    audio_seconds: float = 0.0
    cached_tokens: int = 0  # of input_tokens: served from the provider's prompt cache
    reasoning_tokens: int = 0  # of output_tokens: spent reasoning

    @property
    def empty(self) -> bool:
        return not (self.input_tokens or self.output_tokens or self.audio_seconds)


@dataclass(frozen=True)
class Spent:
    """A learner's usage over a period: tokens (input + output, every kind) and voice seconds."""

    tokens: int = 0
    voice_seconds: float = 0.0


@dataclass(frozen=True)
class DayUsage:
    """One UTC day of every learner's usage: tokens, and the estimated cost (None: unpriced)."""

    day: str
    tokens: int
    cost: float | None


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
        (limits.daily_tokens, today.tokens, N_("today's"), tomorrow),
        (limits.daily_voice_seconds, today.voice_seconds, N_("today's voice"), tomorrow),
        (limits.monthly_tokens, month.tokens, N_("this month's"), _next_month(now)),
        (
            limits.monthly_voice_seconds,
            month.voice_seconds,
            N_("this month's voice"),
            _next_month(now),
        ),
    )
    for cap, spent, what, resets in checks:
        if cap and spent >= cap:
            return _(
                "You have used {what} allowance on this bot, so I can't answer until it resets "
                "on {day} at {time} UTC. Nothing was saved."
            ).format(what=_(what), day=f"{resets:%Y-%m-%d}", time=f"{resets:%H:%M}")
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
        cached = min(call.cached_tokens, call.input_tokens)
        cached_price = price.input if price.cached_input is None else price.cached_input
        total += (call.input_tokens - cached) / 1e6 * price.input + cached / 1e6 * cached_price
        total += call.output_tokens / 1e6 * price.output
        total += call.audio_seconds / 60 * price.audio_minute
    return total


def unpriced(pricing: PricingConfig, calls: Sequence[Call]) -> list[str]:
    """The models these calls used that `[pricing]` has no price for."""
    return sorted({c.model for c in calls if c.model not in pricing.models and not c.empty})


def _call(e: LedgerEntry) -> Call:
    """A ledger row's figures as the call they add up to (what the cost is computed from)."""
    return Call(
        e.kind,
        e.model,
        e.input_tokens,
        e.output_tokens,
        e.audio_seconds,
        cached_tokens=e.cached_tokens,
        reasoning_tokens=e.reasoning_tokens,
    )


class UsageLedger:
    """The `usage` table: what each learner's calls cost, added up per UTC day."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def record(
        self, user_id: int, calls: Sequence[Call], now: datetime, *, turns: int = 0
    ) -> None:
        """Add these calls (and `turns` answered turns) to the learner's day, in one commit."""
        counted = [c for c in calls if not c.empty]
        if not counted and not turns:
            return
        if not counted:  # a turn whose model reported no usage still counts as a turn
            counted = [Call("reply", "")]
        entries = [
            LedgerEntry(
                c.kind,
                c.model,
                c.input_tokens,
                c.output_tokens,
                c.cached_tokens,
                c.reasoning_tokens,
                c.audio_seconds,
                turns if n == 0 else 0,
            )
            for n, c in enumerate(counted)
        ]
        await self.db.ledger.add_usage(user_id, as_utc(now).date().isoformat(), entries)

    async def spent(self, user_id: int, since: datetime) -> Spent:
        """The learner's tokens and voice seconds from `since`'s UTC day on."""
        return Spent(*await self.db.ledger.usage_spent(user_id, as_utc(since).date().isoformat()))

    async def over_limit(self, limits: LimitsConfig, user_id: int, now: datetime) -> str | None:
        """Why the learner may not send another message now (see :func:`over_limit`)."""
        if not any(
            (
                limits.daily_tokens,
                limits.monthly_tokens,
                limits.daily_voice_seconds,
                limits.monthly_voice_seconds,
            )
        ):
            return None
        today = await self.spent(user_id, now)
        month = await self.spent(user_id, month_start(now))
        return over_limit(limits, today, month, now)

    async def report(self, since: datetime) -> list[LearnerUsage]:
        """Every learner's usage from `since`'s UTC day on, most tokens first."""
        by_user: dict[int, list[LedgerEntry]] = {}
        for user_id, entry in await self.db.ledger.usage_since(as_utc(since).date().isoformat()):
            by_user.setdefault(user_id, []).append(entry)
        names = await self.db.ledger.learner_names(list(by_user))
        out = []
        for user_id, found in by_user.items():
            tokens: dict[str, int] = {}
            for e in found:
                if e.input_tokens + e.output_tokens:
                    tokens[e.kind] = tokens.get(e.kind, 0) + e.input_tokens + e.output_tokens
            calls = [_call(e) for e in found]
            out.append(
                LearnerUsage(
                    user_id=user_id,
                    name=names.get(user_id, ""),
                    turns=sum(e.turns for e in found),
                    tokens=tokens,
                    voice_seconds=sum(c.audio_seconds for c in calls),
                    calls=calls,
                )
            )
        return sorted(out, key=lambda u: -u.total_tokens)

    async def daily(self, since: datetime) -> list[tuple[str, list[Call]]]:
        """Every learner's calls added up per UTC day from `since`'s day on, oldest day first
        (the operator's chart)."""
        days: dict[str, list[Call]] = {}
        for day, entry in await self.db.ledger.usage_per_day(as_utc(since).date().isoformat()):
            days.setdefault(day, []).append(_call(entry))
        return list(days.items())

    async def delete_user(self, user_id: int) -> int:
        """Forget the learner's usage (their /forgetme); how many rows went."""
        return await self.db.ledger.delete_usage(user_id)

    async def export(self, user_id: int) -> list[dict[str, Any]]:
        """The learner's usage rows, for /export."""
        return await self.db.ledger.usage_rows(user_id)


class Metering:
    """The engine's side of usage: which model each kind of call uses, the ledger it is counted
    in, and the limits checked before a reply."""

    def __init__(
        self,
        ledger: UsageLedger,
        limits: LimitsConfig,
        models: Mapping[str, str],
        pricing: PricingConfig | None = None,
    ) -> None:
        self.ledger = ledger
        self.limits = limits
        self.models = dict(models)  # kind → model name, as configured
        self.pricing = pricing or PricingConfig()

    async def report(self, days: int, now: datetime) -> str:
        """Every learner's usage over the last `days` UTC days, with the estimated cost."""
        since = as_utc(now) - timedelta(days=days - 1)
        return render_report(await self.ledger.report(since), self.pricing, days, since)

    async def daily(self, days: int, now: datetime) -> list[DayUsage]:
        """Tokens and estimated cost per UTC day over the last `days` days (days without use
        included, as zero)."""
        since = as_utc(now) - timedelta(days=days - 1)
        spent = dict(await self.ledger.daily(since))
        out = []
        for n in range(days):
            day = (since + timedelta(days=n)).date().isoformat()
            calls = spent.get(day, [])
            tokens = sum(c.input_tokens + c.output_tokens for c in calls)
            out.append(DayUsage(day, tokens, cost(self.pricing, calls) if calls else None))
        return out

    def call(
        self, kind: str, input_tokens: int = 0, output_tokens: int = 0, audio_seconds: float = 0.0
    ) -> Call:
        """One call of this kind, on the model configured for it."""
        return Call(kind, self.models.get(kind, ""), input_tokens, output_tokens, audio_seconds)

    def model_call(self, kind: str, usage: Usage) -> Call:
        """One model call of this kind as its provider reported it (cached input and reasoning
        tokens included)."""
        return Call(
            kind,
            self.models.get(kind, ""),
            usage.input_tokens,
            usage.output_tokens,
            cached_tokens=usage.cached_tokens,
            reasoning_tokens=usage.reasoning_tokens,
        )

    async def refusal(self, user_id: int, now: datetime) -> str | None:
        """Why this learner may not send another message now; None if they may."""
        return await self.ledger.over_limit(self.limits, user_id, now)

    async def add(
        self, user_id: int, now: datetime, calls: Sequence[Call], *, turns: int = 0
    ) -> None:
        """Count the calls; a failure is logged, never the turn's (the reply went out)."""
        try:
            await self.ledger.record(user_id, calls, now, turns=turns)
        except Exception:
            log.exception("counting the usage of user %s failed", user_id)


def render_report(
    learners: Sequence[LearnerUsage], pricing: PricingConfig, days: int, since: datetime
) -> str:
    """/usage and `memora usage`: one line per learner, most tokens first, in the current
    language (the admin's for /usage; the CLI, which has no learner, speaks English)."""
    if days > 1:
        span = ngettext("the last {days} day", "the last {days} days", days).format(days=days)
    else:
        span = _("today")
    head = _("Usage, {span} (since {date}, UTC)").format(
        span=span, date=f"{as_utc(since):%Y-%m-%d}"
    )
    if not learners:
        return _("{head}: nobody has used the bot.").format(head=head)
    all_calls = [c for learner in learners for c in learner.calls]
    total = cost(pricing, all_calls)
    summed = sum(u.total_tokens for u in learners)
    n = len(learners)
    top = _("{head}: {learners}, {tokens}").format(
        head=head,
        learners=ngettext("{n} learner", "{n} learners", n).format(n=n),
        tokens=ngettext("{n} token", "{n} tokens", summed).format(n=f"{summed:,}"),
    )
    if total is not None:
        top += _(", est. cost {cost} {currency}").format(
            cost=f"{total or 0:.4f}", currency=pricing.currency
        )
    lines = [top]
    for u in learners:
        kinds = " · ".join(f"{k} {n:,}" for k, n in u.tokens.items())
        each = cost(pricing, u.calls)
        parts = [
            ngettext("{n} turn", "{n} turns", u.turns).format(n=u.turns),
            ngettext("{n} token", "{n} tokens", u.total_tokens).format(n=f"{u.total_tokens:,}")
            + (f" ({kinds})" if kinds else ""),
        ]
        cached = sum(c.cached_tokens for c in u.calls)
        reasoning = sum(c.reasoning_tokens for c in u.calls)
        if cached:
            parts.append(_("cached input {n}").format(n=f"{cached:,}"))
        if reasoning:
            parts.append(_("reasoning {n}").format(n=f"{reasoning:,}"))
        if u.voice_seconds:
            parts.append(_("voice {seconds} s").format(seconds=f"{u.voice_seconds:.0f}"))
        if each is not None:
            parts.append(f"≈ {each:.4f} {pricing.currency}")
        who = f"{u.name} ({u.user_id})" if u.name else str(u.user_id)
        lines.append(f"• {who}: " + " · ".join(parts))
    missing = unpriced(pricing, all_calls)
    if missing:
        lines.append(
            _("No price in [pricing] for: {models} (no cost shown where they count)").format(
                models=", ".join(missing)
            )
        )
    return "\n".join(lines)

"""The weekly report's text, written from the learner model in plain words (no LLM call).

A report covers the seven local days before the day it goes out ("this week") and compares
them with the seven before ("last week"): messages and study days, mistakes by category with
the trend, new words, then the standing figures /progress computes (vocabulary and its predicted
retention, review cards due, the level history, the goal countdown). The chart sent with it is
/progress's own (memora.learner.progress.chart).

A week without any activity still gets a report, a short encouraging one: the learner asked
for it, silence would read as a broken bot, and a quiet week is exactly when a nudge helps. It
says so plainly and keeps only what still matters (cards due, the goal countdown).

The text is in the current language (memora.i18n; the caller sets the learner's). It fits a
Telegram photo caption (1024 characters), so the report is one message with
its chart: one send, retried whole by the outbox, never a chart without its words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from memora.i18n import _, month_name, ngettext
from memora.learner import progress
from memora.learner.model import MISTAKE_CATEGORIES
from memora.learner.service import Learner

CAPTION_LIMIT = 1024  # Telegram's photo caption
SHOWN_CATEGORIES = 4


@dataclass(frozen=True)
class Week:
    """One learner's week, this one and the one before, with the standing /progress figures."""

    first: date  # the first day of "this week" (local)
    last: date  # its last day: the day before the report
    messages: tuple[int, int]  # (this week, last week)
    study_days: tuple[int, int]
    mistakes: dict[str, tuple[int, int]]  # category → (this week, last week), seen categories
    new_words: tuple[int, int]
    progress: progress.Progress

    @property
    def active(self) -> bool:
        return bool(self.messages[0] or self.study_days[0] or self.new_words[0]) or any(
            now for now, _before in self.mistakes.values()
        )


def windows(today: date) -> tuple[tuple[date, date], tuple[date, date]]:
    """(this week, last week) as inclusive (first, last) local dates: the 7 days before today
    and the 7 before those."""
    this = (today - timedelta(days=7), today - timedelta(days=1))
    before = (today - timedelta(days=14), today - timedelta(days=8))
    return this, before


def _which(day: date, this: tuple[date, date], before: tuple[date, date]) -> int | None:
    if this[0] <= day <= this[1]:
        return 0
    if before[0] <= day <= before[1]:
        return 1
    return None


def summarise(
    p: progress.Progress,
    *,
    days: list[tuple[str, int, int]],
    mistakes: list[tuple[str, str]],
    word_dates: list[str],
    local_date: Callable[[str], date],
) -> Week:
    """Count this week and last from the learner's raw rows. `local_date` turns a stored UTC
    ISO time into the learner's local date (their zone)."""
    this, before = windows(p.today)
    messages, studied, words = [0, 0], [0, 0], [0, 0]
    for day, n_messages, n_reviews in days:
        i = _which(date.fromisoformat(day), this, before)
        if i is not None:
            messages[i] += n_messages
            studied[i] += 1 if n_messages or n_reviews else 0
    by_cat: dict[int, Counter[str]] = {0: Counter(), 1: Counter()}
    for at, category in mistakes:
        i = _which(local_date(at), this, before)
        if i is not None:
            by_cat[i][category] += 1
    for at in word_dates:
        i = _which(local_date(at), this, before)
        if i is not None:
            words[i] += 1
    seen = [c for c in MISTAKE_CATEGORIES if by_cat[0][c] or by_cat[1][c]]
    seen += sorted(c for c in {*by_cat[0], *by_cat[1]} if c not in seen)  # unknown ones last
    return Week(
        first=this[0],
        last=this[1],
        messages=(messages[0], messages[1]),
        study_days=(studied[0], studied[1]),
        mistakes={c: (by_cat[0][c], by_cat[1][c]) for c in seen},
        new_words=(words[0], words[1]),
        progress=p,
    )


async def gather(learner: Learner, user_id: int, now: datetime) -> Week:
    """The learner's week as of `now`, read from their own rows only."""
    p = await learner.progress(user_id, now)
    profile = await learner.profile(user_id, now)
    zone = profile.zone()
    words = await learner.entries.words(user_id)
    return summarise(
        p,
        days=await learner.entries.days(user_id),
        mistakes=await learner.entries.mistake_dates(user_id),
        word_dates=[str(w["at"]) for w in words],
        local_date=lambda at: datetime.fromisoformat(at).astimezone(zone).date(),
    )


def _versus(now: int, before: int) -> str:
    if now == before:
        return _("same as last week ({before})").format(before=before)
    sign = "↑" if now > before else "↓"
    return _("last week {before}, {change}").format(
        before=before, change=f"{sign}{abs(now - before)}"
    )


def _mistake_trend(now: int, before: int) -> str:
    if now == before:
        return _("steady")
    return _("fewer ↓") if now < before else _("more ↑")


def _span(first: date, last: date) -> str:
    month = month_name(last.month)
    if first.month == last.month:
        return _("{first}–{last} {month}").format(first=first.day, last=last.day, month=month)
    return _("{first} {first_month} – {last} {month}").format(
        first=first.day, first_month=month_name(first.month), last=last.day, month=month
    )


def compose(week: Week, name: str = "") -> str:
    """The report, in plain words; only the figures that are there. At most CAPTION_LIMIT."""
    p = week.progress
    span = _span(week.first, week.last)
    if name:
        head = _("📅 Your week in English, {name} ({span}: the 7 days before today)").format(
            name=name, span=span
        )
    else:
        head = _("📅 Your week in English ({span}: the 7 days before today)").format(span=span)
    lines = [head]
    if not week.active:
        lines.append(
            _(
                "A quiet week: no practice logged. That's fine — one message today is a fresh "
                "start. Send me a sentence about your weekend, or a voice note."
            )
        )
    else:
        messages, days = week.messages, week.study_days
        lines.append(
            _("• Messages: {n} ({versus})").format(n=messages[0], versus=_versus(*messages))
        )
        lines.append(
            _("• Study days: {n} of 7 (last week {before})").format(n=days[0], before=days[1])
        )
        counts = week.mistakes.values()
        total = (sum(n for n, _b in counts), sum(b for _n, b in counts))
        if total == (0, 0):
            lines.append(_("• Mistakes: none logged"))
        else:
            lines.append(
                _("• Mistakes: {n} (last week {before}, {trend})").format(
                    n=total[0], before=total[1], trend=_mistake_trend(*total)
                )
            )
            shown = sorted(week.mistakes.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
            was = _("    {category}: {n} (was {before}, {trend})")
            lines += [
                was.format(category=cat, n=n, before=b, trend=_mistake_trend(n, b))
                for cat, (n, b) in shown[:SHOWN_CATEGORIES]
            ]
        lines.append(
            _("• New words: {n} (last week {before})").format(
                n=week.new_words[0], before=week.new_words[1]
            )
        )
    if p.vocabulary and p.retained >= 0.5:  # FSRS: a word never reviewed counts 0
        share = p.retained / p.vocabulary
        lines.append(
            ngettext(
                "• Vocabulary: {words} word, ≈{retained} ({share}) likely remembered now",
                "• Vocabulary: {words} words, ≈{retained} ({share}) likely remembered now",
                p.vocabulary,
            ).format(words=p.vocabulary, retained=f"{p.retained:.0f}", share=f"{share:.0%}")
        )
    elif p.vocabulary:
        lines.append(
            ngettext(
                "• Vocabulary: {words} word; review it so it stays — /review",
                "• Vocabulary: {words} words; review them so they stay — /review",
                p.vocabulary,
            ).format(words=p.vocabulary)
        )
    if p.due_now:
        lines.append(_("• Review cards due: {n} — /review").format(n=p.due_now))
    if p.level_history:
        levels = p.level_history[-4:]  # the latest changes
        lines.append(
            _("• Level: {levels}").format(
                levels=" → ".join(f"{lvl} ({d[:10]})" for d, lvl in levels)
            )
        )
    if p.countdown:
        lines.append(_("• Goal: {countdown}").format(countdown=p.countdown))
    if week.active and p.streak >= 2:
        lines.append(_("🔥 {n}-day streak — keep it going!").format(n=p.streak))
    lines.append(_("(/remind weekly off to stop these reports.)"))
    return _fit("\n".join(lines))


def _fit(text: str) -> str:
    """Within a photo caption: drop middle lines (never the head or the way to stop)."""
    lines = text.splitlines()
    while len("\n".join(lines)) > CAPTION_LIMIT and len(lines) > 2:
        del lines[-2]
    return "\n".join(lines)[:CAPTION_LIMIT]

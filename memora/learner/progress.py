"""/progress: figures from the learner's own data, as text and as a chart (matplotlib, Agg).

The chart is drawn in the core to PNG bytes, so any adapter can send it (Telegram sends a photo;
the terminal prints the text only). Its labels are in the learner's language; Chinese ones are
drawn with Noto Sans CJK from the `cvttf-notosanscjk-regular` package (a font file in the wheel).
"""

from __future__ import annotations

import io
from collections import defaultdict
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from memora.i18n import DEFAULT, _, current, ngettext
from memora.learner import review
from memora.learner.model import MISTAKE_CATEGORIES
from memora.learner.profile import Profile, difficulty_line, goal_countdown

WEEKS = 8


def streak(days: list[str], today: date) -> int:
    """Consecutive study days ending today (or yesterday: today is not over yet)."""
    studied = {date.fromisoformat(d) for d in days}
    day = today if today in studied else today - timedelta(days=1)
    n = 0
    while day in studied:
        n += 1
        day -= timedelta(days=1)
    return n


def week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


@dataclass(frozen=True)
class Progress:
    """Everything /progress shows, computed once."""

    today: date
    level_history: list[tuple[str, str]]  # (date, level), oldest first
    days_studied: int
    streak: int
    weeks: list[date]  # the last WEEKS week starts (Mondays), oldest first
    messages_per_week: list[int]
    mistakes_per_week: dict[str, list[int]]  # category → counts per week (only categories seen)
    vocabulary: int
    retained: float  # expected number of words recalled now (sum of FSRS retrievability)
    cards: int
    due_now: int
    next_due: datetime | None
    countdown: str | None
    difficulties: str | None
    extra: dict[str, str] = field(default_factory=dict)


def compute(
    *,
    profile: Profile,
    now: datetime,
    level_changes: list[tuple[str, str]],
    days: list[tuple[str, int, int]],
    mistakes: list[tuple[str, str]],
    word_states: list[str],
    cards: int,
    due_now: int,
    next_due: datetime | None,
) -> Progress:
    today = profile.today(now)
    zone = profile.zone()
    this_week = week_start(today)
    weeks = [this_week - timedelta(weeks=WEEKS - 1 - i) for i in range(WEEKS)]
    index = {w: i for i, w in enumerate(weeks)}
    per_week = [0] * WEEKS
    for day, messages, _reviews in days:
        i = index.get(week_start(date.fromisoformat(day)))
        if i is not None:
            per_week[i] += messages
    by_cat: dict[str, list[int]] = defaultdict(lambda: [0] * WEEKS)
    for at, category in mistakes:
        local = datetime.fromisoformat(at).astimezone(zone).date()
        i = index.get(week_start(local))
        if i is not None:
            by_cat[category][i] += 1
    ordered = {c: by_cat[c] for c in MISTAKE_CATEGORIES if c in by_cat}
    return Progress(
        today=today,
        level_history=level_changes,
        days_studied=sum(1 for _, m, r in days if m or r),
        streak=streak([d for d, m, r in days if m or r], today),
        weeks=weeks,
        messages_per_week=per_week,
        mistakes_per_week=ordered,
        vocabulary=len(word_states),
        retained=sum(review.retrievability(s, now) for s in word_states),
        cards=cards,
        due_now=due_now,
        next_due=next_due,
        countdown=goal_countdown(profile, now),
        difficulties=difficulty_line(profile),
    )


def _trend(counts: list[int]) -> str:
    """Compare the last four weeks with the four before."""
    before, after = sum(counts[-8:-4]), sum(counts[-4:])
    if before == after:
        return _("steady")
    return _("falling ↓") if after < before else _("rising ↑")


def render(p: Progress, now: datetime) -> str:
    levels = " → ".join(f"{lvl} ({d[:10]})" for d, lvl in p.level_history) or _("not known yet")
    days = ngettext("{n} day", "{n} days", p.streak)
    lines = [
        _("Your progress"),
        _("• Level: {levels}").format(levels=levels),
        _("• Days studied: {days} · streak: {streak}").format(
            days=p.days_studied, streak=days.format(n=p.streak)
        ),
        _("• Messages per week (oldest → this week): {counts}").format(
            counts=" ".join(str(n) for n in p.messages_per_week)
        ),
    ]
    if p.mistakes_per_week:
        lines.append(_("• Mistakes per week by category (oldest → this week):"))
        for cat, counts in p.mistakes_per_week.items():
            lines.append(f"    {cat}: {' '.join(str(n) for n in counts)} ({_trend(counts)})")
    else:
        lines.append(_("• Mistakes: none logged yet"))
    if p.difficulties:
        lines.append(_("• Recurring difficulties: {what}").format(what=p.difficulties))
    pct = f" ({p.retained / p.vocabulary:.0%})" if p.vocabulary else ""
    lines.append(
        ngettext(
            "• Vocabulary: {words} word, ≈{retained} retained now{pct}",
            "• Vocabulary: {words} words, ≈{retained} retained now{pct}",
            p.vocabulary,
        ).format(words=p.vocabulary, retained=f"{p.retained:.1f}", pct=pct)
    )
    due = _("{n} due now").format(n=p.due_now) if p.due_now else _("none due now")
    if not p.due_now and p.next_due is not None:
        due += _(", next {when}").format(when=review.until(p.next_due, now))
    lines.append(_("• Review cards: {cards} ({due}) — /review").format(cards=p.cards, due=due))
    if p.countdown:
        lines.append(_("• Goal: {countdown}").format(countdown=p.countdown))
    return "\n".join(lines)


CJK_FONT_PACKAGE = "cvttf_NotoSansCJK_Regular"  # pip: cvttf-notosanscjk-regular


@cache
def cjk_font() -> str | None:
    """The family name of the packaged CJK font, registered with matplotlib once; None when the
    package is missing (the chart then falls back to matplotlib's own font)."""
    from matplotlib import font_manager  # imported lazily, like the Figure below

    spec = find_spec(CJK_FONT_PACKAGE)  # the path is enough: its __init__ is not needed
    if spec is None or spec.origin is None:
        return None
    fonts = sorted(Path(spec.origin).parent.glob("*.otf"))
    if not fonts:
        return None
    font_manager.fontManager.addfont(str(fonts[0]))
    return str(font_manager.FontProperties(fname=fonts[0]).get_name())


def _fonts(texts: list[str]) -> AbstractContextManager[Any]:
    """Matplotlib settings that can draw these labels: the CJK font first when any is not
    plain ASCII (Chinese labels, a goal written in Chinese), matplotlib's own font otherwise."""
    from matplotlib import rc_context  # lazily: matplotlib loads only when a chart is drawn

    family = cjk_font() if current() != DEFAULT or not all(t.isascii() for t in texts) else None
    if family is None:
        return nullcontext()
    return rc_context({"font.family": [family, "DejaVu Sans"]})


def chart(p: Progress) -> bytes:
    """Messages per week and mistakes per week by category, as PNG bytes (Agg, no display)."""
    from matplotlib.figure import Figure  # imported lazily: ~0.5 s, and only /progress draws

    title = ngettext(
        "Streak {streak} d · {words} word (≈{retained} retained)",
        "Streak {streak} d · {words} words (≈{retained} retained)",
        p.vocabulary,
    ).format(streak=p.streak, words=p.vocabulary, retained=f"{p.retained:.0f}")
    if p.countdown:
        title += f" · {p.countdown}"
    with _fonts([title]):
        fig = Figure(figsize=(8, 5.5), dpi=100)
        top, bottom = fig.subplots(2, 1, sharex=True)
        labels = [w.strftime("%m-%d") for w in p.weeks]
        x = list(range(len(labels)))
        top.bar(x, p.messages_per_week, color="#4C72B0")
        top.set_ylabel(_("messages"))
        top.set_title(title, fontsize=10)
        base = [0] * len(x)
        for category, counts in p.mistakes_per_week.items():
            bottom.bar(x, counts, bottom=base, label=category)
            base = [a + b for a, b in zip(base, counts, strict=True)]
        bottom.set_ylabel(_("mistakes"))
        bottom.set_xticks(x, labels)
        bottom.set_xlabel(_("week starting"))
        if p.mistakes_per_week:
            bottom.legend(fontsize=8, ncols=3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")  # a Figure without pyplot draws with Agg
    return buf.getvalue()

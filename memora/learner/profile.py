"""The learner profile: a few validated fields, with where each value came from.

The profile holds the *stable, structured* facts a tutor needs in every reply (level, scores,
goal and its date, explanation language, interests, study time, time zone); recurring
difficulties are derived from the mistake log, never typed in. Everything else the learner tells
about themselves stays a long-term memory (see the README: "Profile or memory?").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from memora.errors import ProfileError as ProfileError  # re-exported
from memora.i18n import N_, _, current, ngettext, speaking, translator
from memora.learner.model import CEFR_LEVELS, FIELD_HELP, PROFILE_FIELDS
from memora.privacy.secretfilter import looks_secret

MAX_VALUE_CHARS = 120
RECURRING_MIN = 3  # mistakes of one category ...
RECURRING_DAYS = 14  # ... within this many days make it a recurring difficulty (issue 9)


def english(message: str) -> str:
    """A message as its English source. The model's context is always English (stable, and what
    the benchmarks compare), whatever language the learner reads: context_lines writes the
    countdown and the difficulties with this instead of `_`."""
    return message


_LEVEL = re.compile(r"^\s*(?:CEFR\s*)?([ABC][12])\s*[+-]?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class FieldValue:
    """One profile field's current value and where it came from."""

    value: str
    source: str  # "conversation" | "you" | "undo"
    updated_at: str


@dataclass(frozen=True)
class Difficulty:
    """A mistake category the learner keeps getting wrong."""

    category: str
    count: int  # mistakes of this category in the last RECURRING_DAYS days


@dataclass(frozen=True)
class Profile:
    """A user's profile as stored, plus the difficulties derived from their mistakes."""

    user_id: int
    fields: dict[str, FieldValue] = field(default_factory=dict)
    difficulties: tuple[Difficulty, ...] = ()

    def get(self, name: str) -> str | None:
        item = self.fields.get(name)
        return item.value if item else None

    @property
    def empty(self) -> bool:
        return not self.fields and not self.difficulties

    def zone(self) -> tzinfo:
        """The learner's time zone (UTC until they tell us)."""
        return ZoneInfo(self.get("timezone") or "UTC")

    def today(self, now: datetime) -> date:
        return now.astimezone(self.zone()).date()


def known_field(name: str) -> str:
    """The canonical field name ("Explanation-Language" → "explanation_language")."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    aliases = {"language": "explanation_language", "tz": "timezone", "date": "goal_date"}
    key = aliases.get(key, key)
    if key not in PROFILE_FIELDS:
        raise ProfileError(
            _("I have no profile field '{name}'. Fields: {fields}.").format(
                name=name, fields=", ".join(PROFILE_FIELDS)
            )
        )
    return key


def _timezone(value: str) -> str:
    name = value.strip()
    if name.upper() in {"UTC", "GMT", "Z"}:
        return "UTC"
    try:
        ZoneInfo(name)
        return name
    except (ZoneInfoNotFoundError, ValueError):
        pass
    for candidate in available_timezones():  # "asia/taipei" is Asia/Taipei
        if candidate.lower() == name.lower():
            return candidate
    raise ProfileError(
        _(
            "'{name}' is not a time zone I know. Use an IANA name such as Asia/Taipei, "
            "Asia/Shanghai or Europe/London."
        ).format(name=name)
    )


def clean_value(name: str, value: str) -> str:
    """The value as stored, or ProfileError with a clear reason."""
    text = " ".join(value.split())
    if not text:
        raise ProfileError(
            _("Give a value: /profile set {name} <{what}>.").format(
                name=name, what=_(FIELD_HELP[name])
            )
        )
    if name == "level":
        m = _LEVEL.match(text)
        if not m:
            raise ProfileError(
                _(
                    "'{text}' is not a CEFR level. Use one of {levels} "
                    "(exam scores go in: /profile set scores TOEIC 850)."
                ).format(text=text, levels=", ".join(CEFR_LEVELS))
            )
        return m.group(1).upper()
    if name == "goal_date":
        try:
            return date.fromisoformat(text).isoformat()
        except ValueError:
            raise ProfileError(
                _("'{text}' is not a date: write it as YYYY-MM-DD.").format(text=text)
            ) from None
    if name == "timezone":
        return _timezone(text)
    if len(text) > MAX_VALUE_CHARS:
        n = MAX_VALUE_CHARS
        short = ngettext(
            "Keep it short: {n} character at most.", "Keep it short: {n} characters at most.", n
        )
        raise ProfileError(short.format(n=n))
    if looks_secret(text):
        raise ProfileError(_("That looks like a password, key or number I must not store."))
    return text


def goal_countdown(profile: Profile, now: datetime, lang: str | None = None) -> str | None:
    """'TOEIC 900 in 41 days' (or today, or done once its day has passed) in the learner's
    language (`lang` "en" for the model's context); None without a goal date."""
    when = profile.get("goal_date")
    if not when:
        return None
    gettext = translator(lang) if lang else _
    goal = profile.get("goal") or gettext(N_("Your goal"))
    days = (date.fromisoformat(when) - profile.today(now)).days
    if days > 1:
        with speaking(lang or current()):
            countdown = ngettext(
                "{goal} in {days} day ({date})", "{goal} in {days} days ({date})", days
            )
        return countdown.format(goal=goal, days=days, date=when)
    if days == 1:
        line = N_("{goal} tomorrow ({date})")
    elif days == 0:
        line = N_("{goal} today ({date})")
    else:  # over: kept as done, not counted in days ago
        line = N_("{goal} ({date}, done)")
    return gettext(line).format(goal=goal, days=abs(days), date=when)


def goal_over(profile: Profile, now: datetime) -> bool:
    """Whether the goal's day has passed in the learner's time zone (it is then done)."""
    when = profile.get("goal_date")
    return bool(when) and date.fromisoformat(str(when)) < profile.today(now)


def difficulty_line(profile: Profile, gettext: Callable[[str], str] = _) -> str | None:
    """The recurring difficulties, 'tense (4× in 14 d)', in the learner's language (`gettext`:
    english for the model's context); None without any."""
    if not profile.difficulties:
        return None
    each = gettext(N_("{category} ({count}× in {days} d)"))
    return ", ".join(
        each.format(category=d.category, count=d.count, days=RECURRING_DAYS)
        for d in profile.difficulties
    )


# What a group's reply may know of a member's profile under the default privacy scope: how to
# pitch the English, not facts about their life (goals, interests, timezone, difficulties).
TEACHING_FIELDS = ("level", "explanation_language")


def context_lines(profile: Profile, now: datetime, *, teaching_only: bool = False) -> list[str]:
    """The profile as the reply model sees it: one 'field: value' line each (a goal with a date
    as one countdown line: fewer tokens in every reply). `teaching_only` keeps only
    TEACHING_FIELDS (a group reply, where the rest of the profile is the member's own)."""
    if teaching_only:
        return [
            f"- {name}: {profile.fields[name].value}"
            for name in TEACHING_FIELDS
            if name in profile.fields
        ]
    countdown = goal_countdown(profile, now, "en")
    skip = {"goal", "goal_date"} if countdown else set()
    lines = [
        f"- {name}: {profile.fields[name].value}"
        for name in PROFILE_FIELDS
        if name in profile.fields and name not in skip
    ]
    if countdown:
        lines.append(f"- goal: {countdown}")
    difficulties = difficulty_line(profile, english)
    if difficulties:
        lines.append(f"- recurring difficulties: {difficulties}")
    return lines


def render(profile: Profile, now: datetime, who: str = "") -> str:
    """The /profile view: every field, where it came from, and how to change it."""
    head = _("Learner profile for {name}").format(name=who) if who else _("Learner profile")
    rows = []
    for name in PROFILE_FIELDS:
        item = profile.fields.get(name)
        if item is None:
            rows.append(f"• {name}: —")
        else:
            rows.append(f"• {name}: {item.value}  ({item.source}, {item.updated_at[:10]})")
    countdown = goal_countdown(profile, now)
    if countdown:
        rows.append(_("• countdown: {countdown}").format(countdown=countdown))
    rows.append(
        _("• recurring difficulties: {what} (from your mistakes)").format(
            what=difficulty_line(profile) or "—"
        )
    )
    return (
        f"{head}\n"
        + "\n".join(rows)
        + "\n\n"
        + _(
            "Change: /profile set <field> <value> · /profile clear <field> · /profile undo"
            " · /profile history"
        )
    )

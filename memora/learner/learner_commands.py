"""/profile, /review and /progress, and the review buttons — answers any adapter can render.

No LLM call in here. Review buttons carry ``rv:<action>:<card id>:<reviews so far>[:<grade>]``:
the card id is checked against the user who tapped (a card is graded only by its owner), and the
review count makes a second tap, or a tap on an old message, harmless (the card was graded
meanwhile: nothing is graded twice).
"""

from __future__ import annotations

from datetime import datetime

from memora.errors import AlreadyGraded, CardGone, NotYourCard
from memora.i18n import N_, _
from memora.learner import progress, review
from memora.learner.cards import ReviewCard
from memora.learner.model import FIELD_HELP
from memora.learner.profile import (
    TEACHING_FIELDS,
    ProfileError,
    clean_value,
    known_field,
    render,
)
from memora.learner.service import Learner
from memora.storage.learner_schema import iso
from memora.types import UserRef
from memora.views import Button, ButtonAnswer, Reply

PROFILE_USAGE = N_(
    "Usage: /profile · /profile set <field> <value> · /profile clear <field> · /profile undo · "
    "/profile history\nFields:"
)
NO_CARDS = N_(
    "You have no review cards yet. I make them from the words you ask about and the mistakes "
    "you make while we chat — keep talking to me in English!"
)
FORGED = N_("That button isn't one I can use (it may be from an old message). Send /review.")
GONE = N_("That card no longer exists (it was deleted). Send /review for your next card.")
NOT_YOURS = N_("That card belongs to someone else — send /review to get your own cards.")
ALREADY = N_("That card was already graded. Send /review for the next one.")
GRADE_LETTERS = {"a": "again", "h": "hard", "g": "good", "e": "easy"}
GRADE_LABELS = {"again": N_("Again"), "hard": N_("Hard"), "good": N_("Good"), "easy": N_("Easy")}


def _usage() -> str:
    return _(PROFILE_USAGE) + "\n" + "\n".join(f"• {k}: {_(v)}" for k, v in FIELD_HELP.items())


# -- /profile ----------------------------------------------------------------------------------
async def profile_command(
    learner: Learner, user_id: int, arg: str, now: datetime, who: str
) -> Reply:
    verb, _sep, rest = arg.strip().partition(" ")
    verb = verb.lower()
    profiles = learner.profiles
    if not verb:
        return Reply(render(await learner.profile(user_id, now), now, who))
    if verb == "undo":
        change = await profiles.undo(user_id, now)
        if change is None:
            return Reply(_("Nothing to undo: your profile has no changes left."), ok=False)
        back = change.old_value if change.old_value is not None else _("(empty)")
        return Reply(
            _("Undone: {field} is back to {value}.").format(field=change.field, value=back)
        )
    if verb == "history":
        changes = await profiles.history(user_id)
        if not changes:
            return Reply(_("Your profile has no history yet."))
        lines = [
            f"{c.at[:16].replace('T', ' ')} {c.field}: {c.old_value or '—'} → "
            f"{c.new_value or '—'} ({c.source}){_(' [undone]') if c.undone_at else ''}"
            for c in changes[-30:]
        ]
        return Reply(_("Profile history (oldest first):") + "\n" + "\n".join(lines))
    if verb not in {"set", "clear"}:
        return Reply(_usage(), ok=False)
    name, _sep, value = rest.strip().partition(" ")
    if not name:
        return Reply(_usage(), ok=False)
    try:
        field = known_field(name)
        clean = clean_value(field, value) if verb == "set" else None
    except ProfileError as exc:
        return Reply(str(exc), ok=False)
    before = (await learner.profile(user_id, now)).get(field)
    if not await profiles.set_field(user_id, field, clean, source="you", now=now):
        return Reply(
            _("No change: {field} is already {value}.").format(
                field=field, value=clean or _("(empty)")
            )
        )
    was = _(" (was {value})").format(value=before) if before else ""
    if clean:
        done = _("Saved: {field} = {value}{was}.").format(field=field, value=clean, was=was)
    else:
        done = _("Cleared {field}{was}.").format(field=field, was=was)
    return Reply(done + " " + _("/profile undo takes it back."))


PERSONAL = N_(
    "Your /{name} spans all your chats with me, so it stays private: send /{name} in a private "
    "chat with me."
)


async def group_profile(learner: Learner, who: UserRef, arg: str, now: datetime) -> Reply:
    """/profile in a group: only the fields a group reply uses (the rest spans the member's
    private chats); changes and history are made in the private chat."""
    if arg.strip():
        return Reply(_(PERSONAL).format(name="profile"), ok=False)
    profile = await learner.profile(who.id, now)
    rows = [
        f"• {name}: {profile.fields[name].value}" if name in profile.fields else f"• {name}: —"
        for name in TEACHING_FIELDS
    ]
    head = _("Learner profile for {name}").format(name=who.name or "—")
    return Reply(f"{head}\n" + "\n".join(rows) + "\n\n" + _(PERSONAL).format(name="profile"))


# -- /review ------------------------------------------------------------------------------------
def _prompt(card: ReviewCard, due: int, *, answer: bool) -> Reply:
    kind = _("word") if card.kind == "word" else _("your mistake")
    head = _("🔁 Review ({due} due) — {kind}").format(due=due, kind=kind) + f"\n\n{card.front}"
    base = f"rv:{{}}:{card.id}:{card.reps}"
    if not answer:
        return Reply(
            head
            + "\n\n"
            + _("(Think of the answer, then tap Show answer — or type /review show.)"),
            buttons=((Button(_("Show answer"), base.format("s")),),),
        )
    grades = tuple(
        Button(_(GRADE_LABELS[label]), base.format("g") + f":{letter}")
        for letter, label in GRADE_LETTERS.items()
    )
    return Reply(
        f"{head}\n\n{card.back}\n\n"
        + _("How well did you know it? (tap a grade — or type /review again|hard|good|easy)"),
        buttons=(grades,),
    )


async def _nothing_due(
    learner: Learner, user_id: int, now: datetime, graded: datetime | None = None
) -> Reply:
    """No card due now: when the next one is. After a grade (`graded`: when that card comes
    back, which its grade's line says), the next one is either that card or another one."""
    nxt = await learner.cards.next_due(user_id)
    if nxt is None:
        return Reply(_(NO_CARDS))
    if graded is not None and iso(nxt) >= iso(graded):  # as stored: to the second
        return Reply(_("Nothing else to review right now."))
    profile = await learner.profile(user_id, now)
    local = nxt.astimezone(profile.zone())
    when = review.until(nxt, now)
    time = f"{local:%Y-%m-%d %H:%M} {profile.get('timezone') or 'UTC'}"
    if graded is not None:
        text = _("Nothing else to review right now. Another card is due {when} ({time}).")
    else:
        text = _("Nothing to review right now. Your next card is due {when} ({time}).")
    return Reply(text.format(when=when, time=time))


async def next_card(
    learner: Learner,
    user_id: int,
    now: datetime,
    *,
    answer: bool,
    graded: datetime | None = None,
) -> Reply:
    """The next due card (`graded`: when the card just graded comes back, see _nothing_due)."""
    due = await learner.cards.due_cards(user_id, now, limit=1)
    if not due:
        return await _nothing_due(learner, user_id, now, graded)
    return _prompt(due[0], await learner.cards.due_count(user_id, now), answer=answer)


async def _graded(
    learner: Learner, user_id: int, card: ReviewCard, grade: str, now: datetime
) -> tuple[str, datetime]:
    """Grade the card: the line saying when it comes back, and when that is."""
    graded = await learner.cards.grade(user_id, card.id, grade, now, reps=card.reps)
    await learner.note_review(user_id, now)
    note = _("{grade} — you'll see it again {when}.").format(
        grade=_(GRADE_LABELS[grade]), when=review.until(graded.due, now)
    )
    return note, graded.due


async def review_command(
    learner: Learner, user_id: int, arg: str, now: datetime, *, group: bool
) -> Reply:
    """Typed review: /review (the next card), /review show, /review good (grades it)."""
    word = arg.strip().lower()
    if not word:
        reply = await next_card(learner, user_id, now, answer=False)
    elif word in {"show", "answer", "s"}:
        reply = await next_card(learner, user_id, now, answer=True)
    else:
        grade = review.parse_grade(word)
        if grade is None:
            return Reply(
                _("Usage: /review · /review show · /review again|hard|good|easy (or 1-4)"), ok=False
            )
        due = await learner.cards.due_cards(user_id, now, limit=1)
        if not due:
            return await _nothing_due(learner, user_id, now)
        note, back = await _graded(learner, user_id, due[0], grade, now)
        after = await next_card(learner, user_id, now, answer=False, graded=back)
        reply = Reply(f"{note}\n\n{after.text}", buttons=after.buttons)
    if group:  # per caller, privately: one learner's cards are not the group's business
        return Reply(reply.text, ok=reply.ok, buttons=reply.buttons, private=True)
    return reply


async def review_button(learner: Learner, user_id: int, data: str, now: datetime) -> ButtonAnswer:
    """A tap on a review button: checked, then the card shown or graded."""
    parts = data.split(":")
    try:
        if (
            parts[0] != "rv"
            or parts[1] not in {"s", "g"}
            or len(parts) != (4 if parts[1] == "s" else 5)
        ):
            raise ValueError(data)
        card_id, reps = int(parts[2]), int(parts[3])
        grade = GRADE_LETTERS[parts[4]] if parts[1] == "g" else ""
    except (IndexError, ValueError, KeyError):
        return ButtonAnswer(_(FORGED), alert=True)
    try:
        card = await learner.cards.card(user_id, card_id)
        if card.reps != reps:
            raise AlreadyGraded(card_id)
        if not grade:
            due = await learner.cards.due_count(user_id, now)
            return ButtonAnswer(edit=_prompt(card, max(due, 1), answer=True))
        note, back = await _graded(learner, user_id, card, grade, now)
    except CardGone:
        return ButtonAnswer(_(GONE), alert=True)
    except NotYourCard:
        return ButtonAnswer(_(NOT_YOURS), alert=True)
    except AlreadyGraded:
        return ButtonAnswer(_(ALREADY), alert=True)
    shown = f"{card.front}\n\n{card.back}\n\n✔ {note}"
    return ButtonAnswer(
        _(GRADE_LABELS[grade]),
        edit=Reply(shown),
        then=await next_card(learner, user_id, now, answer=False, graded=back),
    )


# -- /mistakes and /words -------------------------------------------------------------------------
SHOWN = 30


async def entries_command(learner: Learner, user_id: int, kind: str, arg: str) -> Reply:
    """/mistakes or /words: the latest entries, numbered; `delete <n>` removes one with its card."""
    name = "mistakes" if kind == "mistake" else "words"
    entries = learner.entries
    items = await (entries.mistakes(user_id) if kind == "mistake" else entries.words(user_id))
    verb, _sep, rest = arg.strip().partition(" ")
    if verb.lower() == "delete":
        try:
            n = int(rest.strip().lstrip("#"))
        except ValueError:
            return Reply(
                _("/{name} delete needs the number shown by /{name}, e.g. /{name} delete 2").format(
                    name=name
                ),
                ok=False,
            )
        if not 1 <= n <= len(items):
            return Reply(
                _("There is no number {n} (you have {count}).").format(n=n, count=len(items)),
                ok=False,
            )
        item = items[n - 1]
        await entries.delete_entry(user_id, kind, int(item["id"]))
        what = item["original"] if kind == "mistake" else item["term"]
        return Reply(_("Deleted: {what} (and its review card).").format(what=what))
    if verb:
        return Reply(_("Usage: /{name} · /{name} delete <n>").format(name=name), ok=False)
    if not items:
        return Reply(
            _("No mistakes logged yet.") if kind == "mistake" else _("No words logged yet.")
        )
    if kind == "mistake":
        lines = [
            f"{i}. “{m['original']}” → “{m['corrected']}” [{m['category']}] {m['reason']}"
            for i, m in enumerate(items[:SHOWN], 1)
        ]
    else:
        lines = [f"{i}. {w['term']} — {w['meaning']}" for i, w in enumerate(items[:SHOWN], 1)]
    more = "\n" + _("… and {n} older").format(n=len(items) - SHOWN) if len(items) > SHOWN else ""
    if kind == "mistake":
        head = _("Your mistakes ({n}, newest first; wrong one? /mistakes delete <n>):")
    else:
        head = _("Your words ({n}, newest first; wrong one? /words delete <n>):")
    head = head.format(n=len(items))
    return Reply(head + "\n" + "\n".join(lines) + more)


# -- /progress ----------------------------------------------------------------------------------
async def progress_command(learner: Learner, user_id: int, now: datetime) -> Reply:
    p = await learner.progress(user_id, now)
    return Reply(progress.render(p, now), photo=progress.chart(p))


__all__ = [
    "PERSONAL",
    "group_profile",
    "profile_command",
    "progress_command",
    "review_button",
    "review_command",
]

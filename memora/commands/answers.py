"""A tap on Yes or No under a question asked before a deletion (memora.privacy.confirmations):
checked against the question, then the deletion done or nothing. The checks: data we never made is
forged; a question closed already (answered, expired, its learner forgotten) is gone; a tap by
anyone but the asked learner is refused and the question stays; a tap from another chat is forged; a
question past its time deletes nothing."""

from __future__ import annotations

from memora.engine import Engine
from memora.i18n import N_, _, ngettext
from memora.privacy.confirmations import FORGETME, read_answer
from memora.storage.pending_asks import PendingAsk
from memora.types import ChatRef, UserRef
from memora.views import ButtonAnswer, Reply

FORGED = N_("That button isn't one I can use (it may be from an old message).")
CLOSED = N_("That question is closed (answered already, or too old): send the command again.")
NOT_YOURS = N_("That question is for someone else: only they can answer it.")
EXPIRED = N_("That question is too old, so nothing was deleted. Ask me again if you still want it.")
KEPT = N_("Nothing was deleted.")


def deleted_everything(counts: dict[str, int]) -> str:
    """What /forgetme's Yes answers: what went."""
    memories, private, group = (
        counts["memories"],
        counts["private_messages"],
        counts["group_messages"],
    )
    return _(
        "Deleted everything I stored about you: {memories}, {private} of our private chat, "
        "{group} in groups (with my replies to them, and those groups' summaries), your "
        "extraction log, your practice reminder, and your learner profile, mistakes, vocabulary "
        "and review cards."
    ).format(
        memories=ngettext("{n} long-term memory", "{n} long-term memories", memories).format(
            n=memories
        ),
        private=ngettext("{n} message", "{n} messages", private).format(n=private),
        group=ngettext("{n} of your messages", "{n} of your messages", group).format(n=group),
    )


async def press_ask(engine: Engine, chat: ChatRef, user: UserRef, data: str) -> ButtonAnswer:
    """A tap on a question's Yes or No (see the module's checks)."""
    answer = read_answer(data)
    if answer is None:
        return ButtonAnswer(_(FORGED), alert=True)
    token, yes = answer
    asks = engine.db.asks
    pending = await asks.get(token)
    if pending is None:
        return ButtonAnswer(_(CLOSED), alert=True)
    if pending.user_id != user.id:
        return ButtonAnswer(_(NOT_YOURS), alert=True)
    if pending.chat_id != chat.id:
        return ButtonAnswer(_(FORGED), alert=True)
    async with engine.exclusive(chat.id, user.id):
        if not await asks.take(token):  # a second tap on the same question
            return ButtonAnswer(_(CLOSED), alert=True)
        if pending.expired(engine.state.now()):
            return ButtonAnswer(_(EXPIRED), alert=True, edit=Reply(_(EXPIRED)))
        if not yes:
            return ButtonAnswer(_(KEPT), edit=Reply(_(KEPT)))
        done = await _delete(engine, pending)
    return ButtonAnswer(edit=Reply(done))


async def _delete(engine: Engine, pending: PendingAsk) -> str:
    """The deletion the question asked about, done; what the learner is told."""
    if pending.kind == FORGETME:
        return deleted_everything(await engine.forget_user(pending.user_id))
    memories = {m.id: m for m in await engine.queries.memories(pending.user_id)}
    gone = 0
    for memory_id in pending.memory_ids:
        memory = memories.get(memory_id)
        if memory is not None and await engine.queries.forget_memory(pending.user_id, memory):
            gone += 1
    return ngettext(
        "🗑 Forgotten, as you asked (deleted for good): {n} memory.",
        "🗑 Forgotten, as you asked (deleted for good): {n} memories.",
        gone,
    ).format(n=gone)

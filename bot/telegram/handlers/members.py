"""The bot added to a group: it introduces itself once, through the outbox."""

from __future__ import annotations

from telegram import Update
from telegram.constants import ChatMemberStatus

from memora.i18n import N_, _
from memora.storage.durable import MESSAGE, Kept

from ..bodies import message_body
from ..context import Context
from ..messages import is_group

JOINED = N_(
    "Hi, I'm Memora, an English tutor that remembers. In this group I answer when you mention "
    "me (@{username}), reply to one of my messages, or use a command — /help lists them. "
    "I keep one conversation for the group and each person's long-term memories separately."
)


async def on_my_chat_member(update: Update, context: Context) -> None:
    """Added to a group: introduce myself once. Removed or anything else: nothing."""
    change = update.my_chat_member
    if change is None or not is_group(change.chat):
        return
    joined = (ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR)
    gone = (ChatMemberStatus.LEFT, ChatMemberStatus.BANNED)
    if change.new_chat_member.status in joined and change.old_chat_member.status in gone:
        text = _(JOINED).format(username=context.bot.username)
        greeting = Kept(message_body(text), MESSAGE)
        who = change.from_user.id if change.from_user else None
        await context.bot_data.need_deliverer().keep(
            change.chat.id, who, [greeting], update_id=update.update_id
        )

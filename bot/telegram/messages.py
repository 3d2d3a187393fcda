"""Reading a Telegram message: who sent it where (as the core's ChatRef/UserRef), whether it is
meant for the bot (a group mention, a reply), and "typing…" while an answer is written."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from telegram import Chat, Message, MessageEntity, Update
from telegram.constants import ChatAction, ChatType
from telegram.error import TelegramError

from memora.commands import COMMANDS
from memora.types import ChatRef, UserRef

from ..inputs import clean, split_command

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0  # Telegram shows "typing…" for ~5 s per chat action


def refs(message: Message) -> tuple[ChatRef, UserRef] | None:
    """The platform-neutral chat and speaker of a message (None without a human sender)."""
    user = message.from_user
    if user is None or user.is_bot:
        return None
    who = UserRef(user.id, user.first_name, user.language_code or "")
    return chat_ref(message.chat), who


def chat_ref(chat: Chat) -> ChatRef:
    """The platform-neutral chat: private, or a group of any kind."""
    if chat.type == ChatType.PRIVATE:
        return ChatRef(chat.id, "private", chat.full_name or "")
    return ChatRef(chat.id, "group", chat.title or "")


def incoming_text(update: Update) -> tuple[Message, str, ChatRef, UserRef] | None:
    """A human's text message with its refs, or None for anything else."""
    message = update.message
    if message is None or message.text is None:
        return None
    who = refs(message)
    return None if who is None else (message, clean(message.text), *who)


def is_group(chat: Chat) -> bool:
    return chat.type in (ChatType.GROUP, ChatType.SUPERGROUP)


def addressed_text(message: Message, username: str, bot_id: int) -> str | None:
    """In a group: the text meant for the bot with the @mention stripped, or None when the
    message is not for the bot (no mention of it and not a reply to one of its messages)."""
    text = message.text or message.caption or ""
    mentioned = False
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.lower() == f"@{username}".lower():
            mentioned = True
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            mentioned = True
            text = text.replace(value, " ")
    replied = message.reply_to_message
    to_bot = bool(replied and replied.from_user and replied.from_user.id == bot_id)
    if not (mentioned or to_bot):
        return None
    if username:
        text = re.sub(rf"(?<![\w@])@{re.escape(username)}\b", " ", text, flags=re.IGNORECASE)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"[ \t]+([,.!?;:，。！？])", r"\1", text)  # "night, @bot?" → "night,?"
    text = re.sub(r"[,，]([.!?。！？])", r"\1", text)  # → "night?"
    return text.strip().lstrip(",:;，：").strip()


def answers(message: Message, username: str, bot_id: int) -> bool:
    """Whether the handlers would answer this message at all: everything in a private chat; in
    a group, our commands and what is addressed to us (a mention, a reply to us)."""
    if message.chat.type == ChatType.PRIVATE:
        return True
    if message.text and message.text.startswith("/"):
        name, target, _ = split_command(message.text)
        return target.lower() == username.lower() or (not target and name in COMMANDS)
    return addressed_text(message, username, bot_id) is not None


@asynccontextmanager
async def typing(message: Message, every: float | None = None) -> AsyncIterator[Callable[[], None]]:
    """Show "typing…" in the message's chat until the block ends (re-sent every few seconds), or
    until the function it yields is called."""
    period = every or TYPING_EVERY
    thread = message.message_thread_id if message.is_topic_message else None

    async def keep_typing() -> None:
        while True:
            try:
                await message.get_bot().send_chat_action(
                    message.chat_id, ChatAction.TYPING, message_thread_id=thread
                )
            except TelegramError as exc:
                log.debug("chat action failed in chat %s: %s", message.chat_id, exc)
            await asyncio.sleep(period)

    task = asyncio.create_task(keep_typing(), name=f"typing-{message.chat_id}")

    def stop() -> None:
        task.cancel()

    try:
        yield stop
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def maybe_typing(message: Message, on: bool) -> AbstractAsyncContextManager[object]:
    return typing(message) if on else nullcontext()

"""Thin handlers: translate an update, call the core, render the result. No memory logic here."""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from typing import Any, TypeAlias

from telegram import Chat, Message, MessageEntity, Update
from telegram.constants import ChatAction, ChatMemberStatus, ChatType
from telegram.error import BadRequest, Conflict, Forbidden, TelegramError
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    CallbackContext,
    CallbackQueryHandler,
    ChatMemberHandler,
    CommandHandler,
    ContextTypes,
    ExtBot,
    MessageHandler,
    TypeHandler,
    filters,
)

from memora.commands import COMMANDS, CommandContext, run_command
from memora.config import Settings, TelegramConfig
from memora.durable import MESSAGE, Kept
from memora.engine import EMPTY, ChatRef, Engine, UserRef
from memora.llm import OnDelta
from memora.views import Reply

from ..inputs import clean
from .durable import Answer, Deliverer, message_body
from .learner import needs_learner_rendering, on_button, send_learner_reply
from .streaming import answer_streamed

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0  # Telegram shows "typing…" for ~5 s per chat action

NOT_ALLOWED = (
    "Sorry, this bot is private and you are not on its list of learners. "
    "Ask its operator to add your user id ({user_id})."
)
NOT_TEXT = "I can read text and listen to voice messages — please type or say your message."
EDITED = (
    "I only read new messages, so I didn't see your edit. "
    "Send it again as a new message if you'd like me to answer it."
)
BARE_MENTION = "Yes? Write your question after my name, or reply to one of my messages. /help"
ERROR = "Sorry — something went wrong on my side and I couldn't finish that. Please try again."
JOINED = (
    "Hi, I'm Memora, an English tutor that remembers. In this group I answer when you mention "
    "me (@{username}), reply to one of my messages, or use a command — /help lists them. "
    "I keep one conversation for the group and each person's long-term memories separately."
)


class BotState:
    """What the handlers need: the application's `bot_data`, typed through ContextTypes. PTB
    creates it empty; `install` fills it before anything runs."""

    settings: Settings

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.exit_stack: AsyncExitStack | None = None  # owns an engine opened in post_init
        self.reminder_jobs: Any = None  # bot.telegram.reminders.ReminderJobs after post_init
        self.weekly_jobs: Any = None  # bot.telegram.weekly.WeeklyJobs after post_init
        self.deliverer: Deliverer | None = None  # the outbox's sender, from post_init
        self.conflict = False  # stopped: another instance was polling with this token first
        self.started = time.monotonic()  # reset when polling starts (post_init)
        self._conflict_said = -math.inf

    @property
    def telegram(self) -> TelegramConfig:
        return self.settings.telegram

    def need_engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("the engine is not open (post_init has not run)")
        return self.engine

    def need_deliverer(self) -> Deliverer:
        if self.deliverer is None:
            raise RuntimeError("the outbox is not open (post_init has not run)")
        return self.deliverer

    def conflicted(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Telegram answered a getUpdates with 409 Conflict: a newcomer stops, in one line."""
        now = time.monotonic()
        if now - self.started < NEWCOMER_SECONDS:
            if not self.conflict:
                self.conflict = True
                log.error(ANOTHER_INSTANCE)
                app.stop_running()
        elif now - self._conflict_said > 60:
            self._conflict_said = now
            log.warning(
                "another bot instance polls with this token (409 Conflict); this one started "
                "first and goes on: stop the other"
            )

    async def answer(self, update: Update, answer: Answer, edit: Message | None = None) -> None:
        """Deliver an update's answer through the outbox (kept until Telegram has it)."""
        await self.need_deliverer().answer(answer, update_id=update.update_id, edit=edit)

    async def notice(self, update: Update, message: Message, text: str) -> None:
        """A short plain answer under `message` (quoting it in groups), through the outbox like
        any answer: an unknown command, a sticker, an edited message, a bare mention."""
        answer = Answer(message, Reply(text), markdown=False, quote=is_group(message.chat))
        await self.answer(update, answer)


Context: TypeAlias = CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], BotState]
CONTEXT_TYPES = ContextTypes(bot_data=BotState)


# -- translation ------------------------------------------------------------------------------
def refs(message: Message) -> tuple[ChatRef, UserRef] | None:
    """The platform-neutral chat and speaker of a message (None without a human sender)."""
    user = message.from_user
    if user is None or user.is_bot:
        return None
    chat = message.chat
    if chat.type == ChatType.PRIVATE:
        return ChatRef(chat.id, "private", chat.full_name or ""), UserRef(user.id, user.first_name)
    return ChatRef(chat.id, "group", chat.title or ""), UserRef(user.id, user.first_name)


def incoming_text(update: Update) -> tuple[Message, str, ChatRef, UserRef] | None:
    """A human's text message with its refs, or None for anything else."""
    message = update.message
    if message is None or message.text is None:
        return None
    who = refs(message)
    return None if who is None else (message, clean(message.text), *who)


def is_group(chat: Chat) -> bool:
    return chat.type in (ChatType.GROUP, ChatType.SUPERGROUP)


def parse_command(text: str) -> tuple[str, str, str]:
    """'/remember@bot I like tea' → ('remember', 'bot', 'I like tea')."""
    head, _, arg = text.strip().partition(" ")
    if "\n" in head:  # "/remember\nsome text"
        head, _, more = head.partition("\n")
        arg = f"{more} {arg}".strip()
    name, _, target = head.removeprefix("/").partition("@")
    return name.lower(), target, arg.strip()


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


def allowed(state: BotState, user_id: int) -> bool:
    ids = state.telegram.allowed_user_ids
    return not ids or user_id in ids or user_id in state.telegram.admin_ids


def answers(message: Message, username: str, bot_id: int) -> bool:
    """Whether the handlers would answer this message at all: everything in a private chat; in
    a group, our commands and what is addressed to us (a mention, a reply to us)."""
    if message.chat.type == ChatType.PRIVATE:
        return True
    if message.text and message.text.startswith("/"):
        name, target, _ = parse_command(message.text)
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


def _maybe_typing(message: Message, on: bool) -> AbstractAsyncContextManager[object]:
    return typing(message) if on else nullcontext()


async def gate(update: Update, context: Context) -> None:
    """The allow-list, before every handler (group -1): a message from anyone else is answered
    with one line where the bot would have answered, and goes no further."""
    message = update.message or update.edited_message
    user = message.from_user if message else None
    if message is None or user is None or user.is_bot or allowed(context.bot_data, user.id):
        return
    log.info("user %s is not allowed; ignored their message", user.id)
    if update.message is not None and answers(message, context.bot.username, context.bot.id):
        await context.bot_data.notice(update, message, NOT_ALLOWED.format(user_id=user.id))
    raise ApplicationHandlerStop


# -- handlers ----------------------------------------------------------------------------------
async def on_command(update: Update, context: Context) -> None:
    """A known command → run_command in the core → the rendered answer."""
    incoming = incoming_text(update)
    if incoming is None:
        return
    message, text, chat, user = incoming
    state = context.bot_data
    name, _, arg = parse_command(text)
    ctx = CommandContext(
        chat,
        user,
        arg,
        is_admin=user.id in state.telegram.admin_ids,
        message_id=message.message_id,
    )
    command = COMMANDS.get(name.lower())
    async with _maybe_typing(message, command is not None and command.runs_turn and bool(arg)):
        reply = await run_command(state.need_engine(), name, ctx)
    if needs_learner_rendering(reply):  # review cards, the progress chart
        await send_learner_reply(update, message, reply, context, name=name)
        return
    answer = Answer(message, reply, markdown=reply.markdown, name=name, quote=chat.is_group)
    await state.answer(update, answer)


async def on_unknown_command(update: Update, context: Context) -> None:
    """A /foo the bot doesn't have: a short pointer to /help (in groups only when addressed)."""
    incoming = incoming_text(update)
    if incoming is None:
        return
    message, text, chat, _ = incoming
    name, target, _ = parse_command(text)
    if chat.is_group and target.lower() != context.bot.username.lower():
        return  # "/foo" or "/foo@otherbot" in a group may be meant for another bot
    text = f"I don't know /{name}. Try /help for the list of commands."
    await context.bot_data.notice(update, message, text)


async def on_text(update: Update, context: Context) -> None:
    """A learner's message → one engine turn, with "typing…" shown while it runs (with
    telegram.stream_replies, until the reply starts growing in one message)."""
    incoming = incoming_text(update)
    if incoming is None:
        return
    message, raw, chat, user = incoming
    text: str | None = raw
    if chat.is_group:
        text = addressed_text(message, context.bot.username, context.bot.id)
        if text is None:
            return  # not for us: stay quiet, store nothing
        text = clean(text)
    state = context.bot_data
    if not text:  # a bare mention, or nothing visible at all
        await state.notice(update, message, BARE_MENTION if chat.is_group else EMPTY)
        return
    engine, question = state.need_engine(), text

    # A forwarded message is someone else's words: answered, never mined for the forwarder's
    # memories. (A quote of another message is not part of `message.text`, so never read.)
    forwarded = message.forward_origin is not None

    async def turn(on_delta: OnDelta | None = None) -> Reply:
        return await engine.handle_turn(
            chat,
            user,
            question,
            message_id=message.message_id,
            update_id=update.update_id,
            on_delta=on_delta,
            forwarded=forwarded,
        )

    def deliver(reply: Reply, preview: Message | None = None) -> Awaitable[None]:
        answer = Answer(message, reply, markdown=reply.markdown, quote=chat.is_group)
        return state.answer(update, answer, edit=preview)

    if state.telegram.stream_replies:
        await answer_streamed(
            message,
            turn,
            typing(message),
            deliver,
            group=chat.is_group,
            drafts=state.telegram.stream_drafts,
        )
        return
    async with typing(message):
        reply = await turn()
    await deliver(reply)


async def on_not_text(update: Update, context: Context) -> None:
    """Stickers, photos, files…: one short line (in groups only when addressed)."""
    message = update.message
    who = refs(message) if message else None
    if message is None or who is None:
        return
    if who[0].is_group and addressed_text(message, context.bot.username, context.bot.id) is None:
        return
    await context.bot_data.notice(update, message, NOT_TEXT)


async def on_edited(update: Update, context: Context) -> None:
    """An edited message changes nothing stored; say so in private chats, stay quiet in groups."""
    message = update.edited_message
    if message is None or message.chat.type != ChatType.PRIVATE or message.text is None:
        return
    await context.bot_data.notice(update, message, EDITED)


async def on_my_chat_member(update: Update, context: Context) -> None:
    """Added to a group: introduce myself once. Removed or anything else: nothing."""
    change = update.my_chat_member
    if change is None or not is_group(change.chat):
        return
    joined = (ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR)
    gone = (ChatMemberStatus.LEFT, ChatMemberStatus.BANNED)
    if change.new_chat_member.status in joined and change.old_chat_member.status in gone:
        text = JOINED.format(username=context.bot.username)
        greeting = Kept(message_body(text), MESSAGE)
        who = change.from_user.id if change.from_user else None
        await context.bot_data.need_deliverer().keep(
            change.chat.id, who, [greeting], update_id=update.update_id
        )


def _stale_tap(error: object) -> bool:
    """A button tap Telegram no longer takes an answer for (handled again after a restart):
    nothing went wrong that the learner needs to hear about."""
    return isinstance(error, BadRequest) and "query is too old" in str(error).lower()


ANOTHER_INSTANCE = (
    "another bot instance is polling with this token (Telegram answered 409 Conflict): this "
    "one stops. Run one `memora run` per bot token (several replicas: webhook mode behind one URL)."
)
# Telegram ends the older of two waiting getUpdates with 409, so both instances see conflicts.
# The one that started polling within this many seconds is the newcomer and stops; one that
# has polled for longer goes on (and says so, at most once a minute).
NEWCOMER_SECONDS = 10.0


async def on_error(update: object, context: Context) -> None:
    """Log first (the logging filter keeps secrets out), then tell the user something short."""
    error = context.error
    if isinstance(error, Conflict) and update is None:  # from getUpdates: a second instance
        context.bot_data.conflicted(context.application)
        return
    update_id = update.update_id if isinstance(update, Update) else None
    if _stale_tap(error):
        log.info("update %s: a button tap Telegram no longer takes an answer for", update_id)
        return
    log.error("failed to handle update %s", update_id, exc_info=error)
    if not isinstance(update, Update) or isinstance(error, Forbidden):
        return
    message = update.effective_message
    if message is None or update.edited_message is not None or update.channel_post is not None:
        return
    try:  # kept like any answer; ignored if this update's answer is already kept
        await context.bot_data.answer(update, Answer(message, Reply(ERROR, ok=False), False))
    except Exception as exc:
        log.warning("could not tell chat %s about the error: %s", message.chat_id, exc)


# -- wiring ------------------------------------------------------------------------------------
def install(
    app: Application[Any, Any, Any, Any, Any, Any], settings: Settings, engine: Engine | None
) -> None:
    """Fill the application's BotState and add every handler, in the order they are tried (an
    application built with `.context_types(CONTEXT_TYPES)`)."""
    from .voice import on_voice  # it builds on this module's helpers

    state: BotState = app.bot_data
    state.settings, state.engine = settings, engine
    app.add_handler(TypeHandler(Update, gate), group=-1)
    new_messages = filters.UpdateType.MESSAGE
    app.add_handler(CommandHandler(list(COMMANDS), on_command, filters=new_messages))
    app.add_handler(MessageHandler(new_messages & filters.COMMAND, on_unknown_command))
    app.add_handler(MessageHandler(new_messages & filters.TEXT, on_text))
    app.add_handler(MessageHandler(new_messages & (filters.VOICE | filters.AUDIO), on_voice))
    app.add_handler(
        MessageHandler(new_messages & ~filters.TEXT & ~filters.StatusUpdate.ALL, on_not_text)
    )
    app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, on_edited))
    app.add_handler(ChatMemberHandler(on_my_chat_member, ChatMemberHandler.MY_CHAT_MEMBER))
    app.add_handler(CallbackQueryHandler(on_button))  # review grades; the core checks the data
    app.add_error_handler(on_error)

"""Slash commands, executed by the core so every adapter renders the same answers."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memora.engine import ChatRef, Engine, UserRef
from memora.llm import ChatMessage
from memora.prompts import MEMORY_BLOCK
from memora.views import Document, Reply, Status, render_history, render_messages

COMMANDS: dict[str, str] = {
    "start": "who I am and how to use me",
    "help": "what I remember and the command list",
    "history": "this chat's full history",
    "context": "exactly what the last request sent to the model",
    "summary": "the rolling summary of older turns",
    "status": "memory and token figures",
    "memories": "your long-term memories, numbered",
    "remember": "<text> — save a memory for you",
    "search": "<query> — your memories ranked, with scores",
    "extraction": "the last raw memory-extraction output for you",
    "forget": "<n> — delete one of your memories",
    "undo": "<n> — undo the last update of one of your memories",
    "reset": "start a fresh conversation in this chat (memories stay)",
    "forgetme": "delete everything stored about you",
    "export": "(admin) this chat's data as JSON; /export <chat_id> for another chat",
}

HELP = """\
I'm Memora, your English tutor. I remember:
• this conversation — the recent turns word for word, older ones as a short summary;
• you — facts worth keeping across days (your level, goals, preferences, difficulties),
  which I pick up from what you say or you save with /remember. Secrets are never stored.
You can always see and change what I remember:
"""


@dataclass(frozen=True)
class CommandContext:
    chat: ChatRef
    user: UserRef
    arg: str
    is_admin: bool = False
    message_id: int | None = None


Handler = Callable[[Engine, CommandContext], Awaitable[Reply]]


def help_text() -> str:
    return HELP + "\n".join(f"/{name} {desc}" for name, desc in COMMANDS.items())


def _no_memory() -> Reply:
    return Reply("Long-term memory is turned off on this bot.", ok=False)


def _usage(name: str) -> Reply:
    return Reply(f"Usage: /{name} {COMMANDS[name].split(' — ')[0]}", ok=False)


async def _help(engine: Engine, ctx: CommandContext) -> Reply:
    return Reply(help_text())


async def _history(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.db.chat(ctx.chat.id)
    text = render_history(await engine.db.messages(ctx.chat.id), row.summarized_count)
    return Reply(text)


async def _context(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.db.chat(ctx.chat.id)
    if not row.last_context:
        return Reply(render_messages("Last request context", []))
    sent = [ChatMessage("system", engine.config.instructions), *row.last_context]
    if ctx.chat.is_group:
        speaker = await engine.db.last_speaker(ctx.chat.id)
        if speaker is not None and speaker[0] != ctx.user.id:
            sent = [_hide_memories(m, speaker[1]) for m in sent]
    return Reply(render_messages("Last request context (system prompt first)", sent))


def _hide_memories(message: ChatMessage, owner: str) -> ChatMessage:
    """In a group, another member's retrieved memories are theirs alone."""
    if message.role != "developer" or not message.content.startswith(MEMORY_BLOCK):
        return message
    n = message.content.count("\n- ")
    return ChatMessage(
        "developer",
        f"({n} long-term memories of {owner or 'another member'}, hidden: only they can see them)",
    )


async def _summary(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.db.chat(ctx.chat.id)
    return Reply(f"Summary (covers {row.summarized_count} messages)\n{row.summary or '(empty)'}")


async def _status(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.db.chat(ctx.chat.id)
    log = await engine.db.extraction(ctx.user.id)
    count = await engine.store.count(ctx.user.id) if engine.store else None
    status = Status(
        history_messages=await engine.db.message_count(ctx.chat.id),
        summarized_messages=row.summarized_count,
        last_context_messages=len(row.last_context),
        summary_available=bool(row.summary),
        memory_count=count,
        last=await engine.db.last_usage(ctx.chat.id),
        session=await engine.db.total_usage(ctx.chat.id),
        extraction_status=f"{log.status} at {log.at}" if log else "none yet",
        summary_error=row.last_summary_error,
        embedding_model=engine.store.embedder.name if engine.store else "off",
    )
    return Reply(status.render())


async def _memories(engine: Engine, ctx: CommandContext) -> Reply:
    if engine.store is None:
        return _no_memory()
    items = await engine.store.list(ctx.user.id)
    if not items:
        return Reply(
            "I don't remember anything about you yet. Tell me about yourself, or /remember"
        )
    lines = []
    for i, m in enumerate(items, 1):
        was = f"  (was: {m.history[-1].text}; /undo {i})" if m.history else ""
        lines.append(f"{i}. {m.text} [{m.category}, {m.source}]{was}")
    who = f" for {ctx.user.name}" if ctx.chat.is_group and ctx.user.name else ""
    return Reply(f"Memories{who} ({len(items)}):\n" + "\n".join(lines))


async def _remember(engine: Engine, ctx: CommandContext) -> Reply:
    if not ctx.arg.strip():
        return _usage("remember")
    if engine.store is None:
        return _no_memory()
    from memora.dedupe import normalise_text
    from memora.extraction import looks_secret

    text = ctx.arg.strip()
    if not normalise_text(text):
        return Reply("There is nothing to remember in that: write a few words.", ok=False)
    if looks_secret(text):
        return Reply("That looks like a password, key or card number — I never store those.")
    if len(text) > 500:
        return Reply("A memory must be short (500 characters at most).", ok=False)
    result = await engine.store.add(
        ctx.user.id,
        text,
        source="manual",
        category="other",
        chat_id=ctx.chat.id,
        message_id=ctx.message_id,
    )
    note = "I already remembered that." if result.action == "duplicate" else f"Saved: {text}"
    await engine.db.log_extraction_manual(ctx.user.id, ctx.chat.id, text)
    reply = await engine.handle_turn(
        ctx.chat, ctx.user, text, message_id=ctx.message_id, extract=False, prefix=f"✅ {note}\n\n"
    )
    if not reply.ok:
        return Reply(f"✅ {note}\n\n{reply.text}", ok=False)
    return reply


async def _search(engine: Engine, ctx: CommandContext) -> Reply:
    if not ctx.arg.strip():
        return _usage("search")
    if engine.store is None:
        return _no_memory()
    found = await engine.store.search(ctx.user.id, ctx.arg.strip(), top_k=10, min_score=0.0)
    if not found.hits:
        return Reply("No memories to search yet.")
    floor = engine.config.min_score
    lines = [
        f"{i}. {h.score:.2f} {'✓' if h.score >= floor else ' '} {h.memory.text}"
        for i, h in enumerate(found.hits, 1)
    ]
    return Reply(
        f"Search: {ctx.arg.strip()}\n(✓ = would be used in a reply; min_score {floor:.2f})\n"
        + "\n".join(lines)
    )


async def _extraction(engine: Engine, ctx: CommandContext) -> Reply:
    log = await engine.db.extraction(ctx.user.id)
    if log is None:
        return Reply("No extraction has run for you yet.")
    parts = [f"Last extraction: {log.status} at {log.at} ({log.tokens} tokens)"]
    parts.append("Raw output:\n" + (log.raw or "(none)"))
    if log.detail:
        parts.append("Result:\n" + log.detail)
    return Reply("\n\n".join(parts))


async def _pick(engine: Engine, ctx: CommandContext, name: str) -> tuple[Any, Reply | None]:
    if not ctx.arg.strip():
        return None, _usage(name)
    if engine.store is None:
        return None, _no_memory()
    items = await engine.store.list(ctx.user.id)
    try:
        n = int(ctx.arg.strip().lstrip("#"))
    except ValueError:
        return None, Reply(f"/{name} needs the number shown by /memories, e.g. /{name} 2", ok=False)
    if not 1 <= n <= len(items):
        return None, Reply(f"There is no memory number {n} (you have {len(items)}).", ok=False)
    return items[n - 1], None


async def _forget(engine: Engine, ctx: CommandContext) -> Reply:
    memory, err = await _pick(engine, ctx, "forget")
    if err:
        return err
    assert engine.store is not None
    await engine.store.delete(ctx.user.id, memory.id)
    for text in {memory.text, *(r.text for r in memory.history)}:
        await engine.db.forget_memory_text(ctx.user.id, text)
    return Reply(f"Forgotten: {memory.text}")


async def _undo(engine: Engine, ctx: CommandContext) -> Reply:
    memory, err = await _pick(engine, ctx, "undo")
    if err:
        return err
    assert engine.store is not None
    restored = await engine.store.revert(ctx.user.id, memory.id)
    if restored is None:
        return Reply("That memory has never been updated; nothing to undo.", ok=False)
    return Reply(f"Restored: {restored.text}")


async def _reset(engine: Engine, ctx: CommandContext) -> Reply:
    n = await engine.db.reset_chat(ctx.chat.id)
    return Reply(
        f"Fresh start: deleted this chat's history ({n} messages) and summary. "
        "Your long-term memories stay (/memories)."
    )


async def _forgetme(engine: Engine, ctx: CommandContext) -> Reply:
    counts = await engine.forget_user(ctx.user.id)
    return Reply(
        "Deleted everything I stored about you: "
        f"{counts['memories']} long-term memories, {counts['private_messages']} messages of our "
        f"private chat, {counts['group_messages']} of your messages in groups (with my replies "
        "to them, and those groups' summaries), and your extraction log."
    )


async def export_chat(engine: Engine, chat_id: int) -> dict[str, Any]:
    """This chat's data (history, summary, usage, participants' memories) as a JSON-able dict."""
    row = await engine.db.chat(chat_id)
    people = await engine.db.participants(chat_id)
    memories: dict[str, Any] = {}
    if engine.store is not None:
        for uid, name in people:
            memories[str(uid)] = {
                "name": name,
                "memories": [
                    {
                        "id": m.id,
                        "text": m.text,
                        "source": m.source,
                        "category": m.category,
                        "created_at": m.created_at,
                        "updated_at": m.updated_at,
                        "chat_id": m.chat_id,
                        "message_id": m.message_id,
                        "history": [
                            {"text": r.text, "replaced_at": r.replaced_at, "reason": r.reason}
                            for r in m.history
                        ],
                    }
                    for m in await engine.store.list(uid)
                ],
            }
    return {
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "chat": {"id": chat_id, "kind": row.kind, "title": row.title},
        "summary": row.summary,
        "summarized_messages": row.summarized_count,
        "history": [
            {
                "seq": m.seq,
                "role": m.role,
                "content": m.content,
                "user_id": m.user_id,
                "user_name": m.user_name,
                "at": m.created_at,
            }
            for m in await engine.db.messages(chat_id)
        ],
        "last_context": [m.as_dict() for m in row.last_context],
        "usage": {
            "turns": await engine.db.turn_rows(chat_id),
            "total_tokens": (await engine.db.total_usage(chat_id)).total,
        },
        "participants": memories,
    }


async def _export(engine: Engine, ctx: CommandContext) -> Reply:
    if not ctx.is_admin:
        return Reply("Only the bot's admins can export data.", ok=False)
    if ctx.chat.is_group:
        return Reply(
            "An export holds every participant's data: ask for it in a private chat with me "
            "(/export <chat_id>).",
            ok=False,
        )
    target = ctx.chat.id
    if ctx.arg.strip():
        try:
            target = int(ctx.arg.strip())
        except ValueError:
            return Reply("Usage: /export [chat_id] — the chat id is a number.", ok=False)
    if target not in await engine.db.chat_ids():
        return Reply(f"I have no data for chat {target}.", ok=False)
    data = await export_chat(engine, target)
    blob = json.dumps(data, ensure_ascii=False, indent=2).encode()
    n = len(data["history"])
    return Reply(
        f"Export of chat {target}: {n} messages.",
        document=Document(f"memora-chat-{target}.json", blob, f"chat {target}, {n} messages"),
    )


HANDLERS: dict[str, Handler] = {
    "start": _help,
    "help": _help,
    "history": _history,
    "context": _context,
    "summary": _summary,
    "status": _status,
    "memories": _memories,
    "remember": _remember,
    "search": _search,
    "extraction": _extraction,
    "forget": _forget,
    "undo": _undo,
    "reset": _reset,
    "forgetme": _forgetme,
    "export": _export,
}
SETTLE_FIRST = {"history", "context", "summary", "status", "memories", "extraction", "export"}


async def run_command(engine: Engine, name: str, ctx: CommandContext) -> Reply:
    """Run one command; unknown names get a helpful answer."""
    handler = HANDLERS.get(name.lower())
    if handler is None:
        return Reply(f"I don't know /{name}. Try /help for the list.", ok=False)
    if name in SETTLE_FIRST:
        await engine.settle(ctx.chat.id)
    if name in {"reset", "forgetme"}:
        async with engine.lock(ctx.chat.id):
            await engine.settle(ctx.chat.id)
            return await handler(engine, ctx)
    return await handler(engine, ctx)

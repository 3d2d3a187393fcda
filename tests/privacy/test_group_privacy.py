"""Privacy between people: in a group a member's replies use only what they said in that group
(unless [retrieval] group_memories = "all"), and a group's export holds that group's data.

Real SQLite, real Chroma and the real local embedder; the model is the scripted FakeLLM, whose
recorded requests show exactly what the group's reply would have been built from.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, UserRef
from memora.longterm import MemoryStore, NewMemory
from tests.support.fakes import FakeLLM

MAY = UserRef(1, "May")
PRIVATE = ChatRef(1, "private", "May")
GROUP = ChatRef(-100, "group", "study group")
SECRET_FACT = "May works as a nurse in Kaohsiung"
GROUP_FACT = "May is preparing for the TOEIC exam with this group"


@pytest.fixture
async def remembered(mem_engine: Engine, store: MemoryStore) -> AsyncIterator[Engine]:
    await store.writer.add(MAY.id, NewMemory(SECRET_FACT, "manual", chat_id=PRIVATE.id))
    await store.writer.add(MAY.id, NewMemory(GROUP_FACT, "manual", chat_id=GROUP.id))
    yield mem_engine


def _sent(llm: FakeLLM) -> str:
    return " ".join(m.content for m in llm.calls[-1].messages)


async def test_a_group_reply_never_sees_the_members_private_facts(
    remembered: Engine, llm: FakeLLM
) -> None:
    await remembered.handle_turn(GROUP, MAY, "What is my job? Is nursing in Kaohsiung hard?")
    assert "Kaohsiung" not in _sent(llm).replace("Is nursing in Kaohsiung hard", "")
    await remembered.handle_turn(GROUP, MAY, "How should I prepare for the TOEIC exam?")
    assert GROUP_FACT in _sent(llm)
    # In the private chat everything the member told me is there to use.
    await remembered.handle_turn(PRIVATE, MAY, "What is my job?")
    assert SECRET_FACT in _sent(llm)


async def test_group_memories_all_widens_the_scope(remembered: Engine, llm: FakeLLM) -> None:
    remembered.state.config = replace(remembered.state.config, group_memories="all")
    await remembered.handle_turn(GROUP, MAY, "What is my job as a nurse?")
    assert SECRET_FACT in _sent(llm)


async def test_memory_commands_in_a_group_show_that_groups_memories(remembered: Engine) -> None:
    ctx = CommandContext(GROUP, MAY, "")
    shown = (await run_command(remembered, "memories", ctx)).text
    assert GROUP_FACT in shown and "Kaohsiung" not in shown
    found = (await run_command(remembered, "search", replace(ctx, arg="nurse job"))).text
    assert "Kaohsiung" not in found
    # /forget 1 in the group deletes the group's memory 1, never a private one.
    gone = (await run_command(remembered, "forget", replace(ctx, arg="1"))).text
    assert gone == "Forgotten for good: memory 1."
    assert remembered.store is not None
    assert [m.text for m in await remembered.store.memories(MAY.id)] == [SECRET_FACT]


async def test_a_groups_export_holds_that_groups_data_only(
    remembered: Engine, llm: FakeLLM
) -> None:
    await remembered.handle_turn(GROUP, MAY, "Good morning, everyone!")
    await remembered.handle_turn(PRIVATE, MAY, "Good morning!")
    admin = CommandContext(PRIVATE, UserRef(99, "Admin"), str(GROUP.id), is_admin=True)
    reply = await run_command(remembered, "export", admin)
    assert reply.document is not None
    data = json.loads(reply.document.content)
    text = json.dumps(data, ensure_ascii=False)
    assert GROUP_FACT in text and "Kaohsiung" not in text
    assert all("learner" not in p for p in data["participants"].values())
    mine = await run_command(remembered, "export", replace(admin, arg=str(PRIVATE.id)))
    assert mine.document is not None and b"Kaohsiung" in mine.document.content


async def test_a_write_in_a_group_never_takes_over_a_private_memory(store: MemoryStore) -> None:
    """The same fact with another number supersedes the older memory, but a group's write is
    matched against that group's memories only: the private one stays, text and chat."""
    private = await store.writer.add(
        MAY.id, NewMemory("Salary is 50000 a month.", "manual", chat_id=1)
    )
    newer = NewMemory("Salary is 60000 a month.", "extracted", "personal", GROUP.id, None)
    (scoped,) = await store.writer.add_many(
        MAY.id, [replace(newer, replaces=private.memory.id)], within=GROUP.id
    )
    assert scoped.action == "added" and scoped.memory.history == ()
    kept = {m.id: m for m in await store.memories(MAY.id)}[private.memory.id]
    assert (kept.text, kept.chat_id, kept.history) == ("Salary is 50000 a month.", 1, ())
    # Unscoped (a private chat's write), the same fact updates the memory it names.
    wider = replace(newer, text="Salary is 70000 a month.", chat_id=1)
    (wide,) = await store.writer.add_many(MAY.id, [replace(wider, replaces=private.memory.id)])
    assert wide.action == "superseded" and wide.memory.id == private.memory.id


async def test_an_earlier_private_text_is_never_shown_or_restored_in_a_group(
    remembered: Engine, store: MemoryStore
) -> None:
    """A group memory that once took over a private one (written before writes kept to their
    group, or under group_memories = "all"): its earlier text is the private chat's."""
    private = {m.text: m for m in await store.memories(MAY.id)}[SECRET_FACT]
    taipei = NewMemory("May works as a nurse in Taipei", "extracted", "personal", GROUP.id, None)
    (took,) = await store.writer.add_many(MAY.id, [replace(taipei, replaces=private.id)])
    assert took.action == "superseded" and took.memory.id == private.id
    assert took.memory.history[-1].chat_id == PRIVATE.id  # where the old text came from
    ctx = CommandContext(GROUP, MAY, "")
    shown = (await run_command(remembered, "memories", ctx)).text
    assert "Taipei" in shown and "Kaohsiung" not in shown and "/undo" not in shown
    n = str(1 + [line for line in shown.splitlines() if line[:1].isdigit()].index(
        next(line for line in shown.splitlines() if "Taipei" in line)
    ))  # fmt: skip
    refused = await run_command(remembered, "undo", replace(ctx, arg=n))
    assert not refused.ok and "Kaohsiung" not in refused.text and "private chat" in refused.text
    # In the private chat the earlier text comes back, and goes back to its chat.
    mine = (await run_command(remembered, "memories", CommandContext(PRIVATE, MAY, ""))).text
    assert "(was: May works as a nurse in Kaohsiung" in mine
    number = next(ln.split(".")[0] for ln in mine.splitlines() if "Taipei" in ln)
    undone = await run_command(remembered, "undo", CommandContext(PRIVATE, MAY, number))
    assert undone.text == f"Restored: {SECRET_FACT}"
    back = {m.id: m for m in await store.memories(MAY.id)}[private.id]
    assert (
        back.chat_id == PRIVATE.id
        and "Kaohsiung" not in (await run_command(remembered, "memories", ctx)).text
    )

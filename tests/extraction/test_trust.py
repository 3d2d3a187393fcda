"""What the learner told us is never lost from view, and "forget that…" in words forgets
(issue 28): /memories and /search list profile facts too; a level or goal memory is dropped for
the profile only when the profile really took the value; a request to forget in words deletes
the memory the model names, tells the learner, and is never itself stored.

Real SQLite (and PostgreSQL), real Chroma and the real local embedder; the model is a scripted
fake at the LLM seam."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memora.commands import CommandContext, answers, press_button, run_command
from memora.engine import ChatRef, Engine, UserRef
from memora.llm import ChatMessage
from memora.longterm import MemoryStore
from memora.privacy.confirmations import yes_no
from memora.views import ButtonAnswer, Reply
from tests.support.bot import WAIT, ask, bot_over_fakes, keyboard
from tests.support.disk import files_holding
from tests.support.extraction import learner_answer, listed, naming
from tests.support.fake_openai import (
    Answer,
    FakeRequest,
    default_responder,
    minimal_instance,
)
from tests.support.fakes import FakeLLM

ALICE = UserRef(1, "Alice")
CHAT = ChatRef(1)
GROUP = ChatRef(-100, "group", "Study group")
LEVEL_MESSAGE = "My English level is B1 and I want to practise travel English."


def ctx(arg: str = "", chat: ChatRef = CHAT) -> CommandContext:
    return CommandContext(chat, ALICE, arg)


async def turn(engine: Engine, text: str, chat: ChatRef = CHAT) -> None:
    reply = await engine.handle_turn(chat, ALICE, text)
    assert reply.ok
    await engine.drain()


# -- /memories shows what the learner said about themselves, profile included ------------------
async def test_memories_lists_profile_facts_with_how_to_change_them(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    llm.parsed.append(
        learner_answer(
            [("The user's English level is B1.", "level"), ("Wants travel English.", "goal")],
            profile=[("level", "B1"), ("goal", "travel English")],
        )
    )
    await turn(mem_engine, LEVEL_MESSAGE)
    shown = (await run_command(mem_engine, "memories", ctx())).text
    assert "I don't remember anything" not in shown
    assert "• level: B1" in shown and "• goal: travel English" in shown
    assert "/profile set <field> <value>" in shown and "/profile clear <field>" in shown
    found = (await run_command(mem_engine, "search", ctx("travel"))).text
    assert "• level: B1" in found


async def test_memories_says_nothing_is_kept_only_when_nothing_is(mem_engine: Engine) -> None:
    shown = (await run_command(mem_engine, "memories", ctx())).text
    assert shown.startswith("I don't remember anything about you yet")


async def test_in_a_group_memories_show_only_the_teaching_fields(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    llm.parsed.append(learner_answer([], profile=[("level", "B2"), ("goal", "a secret promotion")]))
    await turn(mem_engine, "I'm B2 and I want a promotion.")  # in the private chat
    shown = (await run_command(mem_engine, "memories", ctx(chat=GROUP))).text
    assert "• level: B2" in shown and "promotion" not in shown


# -- a fact is never lost between memory and profile -------------------------------------------
async def test_a_refused_profile_value_keeps_the_fact_as_a_memory(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    llm.parsed.append(
        learner_answer(
            [("The user's English level is B1.", "level")],
            profile=[("level", "My English level is B1")],  # not a CEFR level: refused
        )
    )
    await turn(mem_engine, LEVEL_MESSAGE)
    assert [m.text for m in await store.memories(ALICE.id)] == ["The user's English level is B1."]
    profile = await mem_engine.learner.profile(ALICE.id, mem_engine.state.now())
    assert profile.get("level") is None
    log = await mem_engine.queries.extraction_log(ALICE.id)
    assert log is not None and "not a CEFR level" in log.detail


async def test_a_memory_the_profile_took_is_not_stored_twice(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    llm.parsed.append(
        learner_answer(
            [("The user's English level is B1.", "level"), ("Is a nurse.", "personal")],
            profile=[("level", "b1")],
        )
    )
    await turn(mem_engine, "I'm a nurse, level B1.")
    assert [m.text for m in await store.memories(ALICE.id)] == ["Is a nurse."]
    log = await mem_engine.queries.extraction_log(ALICE.id)
    assert log is not None and "kept in the learner profile instead" in log.detail


def listen(engine: Engine, *, with_chat: bool = False) -> list[Any]:
    """The notices the engine sends after replies, as the adapter would get them (their text,
    with the chat's id when `with_chat`); their questions' Yes/No data in `QUESTIONS`."""
    notices: list[Any] = []
    QUESTIONS.clear()

    async def notify(chat: ChatRef, user: UserRef, notice: Reply) -> None:
        notices.append((chat.id, notice.text) if with_chat else notice.text)
        question = yes_no(notice.buttons)
        if question is not None:
            QUESTIONS.append(question)

    engine.state.notify = notify
    return notices


QUESTIONS: list[tuple[str, str]] = []


async def answer(engine: Engine, yes: bool, chat: ChatRef = CHAT) -> ButtonAnswer:
    """The learner taps Yes (or No) under the last question a notice asked."""
    yes_data, no_data = QUESTIONS[-1]
    return await press_button(engine, chat, ALICE, yes_data if yes else no_data)


# -- "forget that…" in words --------------------------------------------------------------------
async def remembered(engine: Engine, llm: FakeLLM, *facts: str) -> None:
    llm.parsed.append(learner_answer([(f, "personal") for f in facts]))
    await turn(engine, "Let me tell you about me: " + " ".join(facts))


async def test_forget_in_words_asks_first_naming_the_memory_and_only_yes_deletes(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    notices = listen(mem_engine, with_chat=True)
    await remembered(mem_engine, llm, "Lives in Taipei.", "Works as a nurse.")
    naming(llm, "Taipei")
    await turn(mem_engine, "忘掉我住在台北這件事")
    assert {m.text for m in await store.memories(ALICE.id)} == {
        "Lives in Taipei.",
        "Works as a nurse.",
    }
    assert notices == [
        (
            CHAT.id,
            "🗑 You asked me to forget this memory:\n• Lives in Taipei.\n"
            "Delete it for good? Nothing can bring it back.",
        )
    ]
    log = await mem_engine.queries.extraction_log(ALICE.id)
    assert log is not None and "the learner asked to forget 1 (" in log.detail
    assert "Taipei" not in log.detail + log.raw
    no = await answer(mem_engine, yes=False)
    assert no.edit is not None and no.edit.text == "Nothing was deleted."
    assert len(await store.memories(ALICE.id)) == 2

    naming(llm, "Taipei")
    await turn(mem_engine, "Please forget that I live in Taipei.")
    done = await answer(mem_engine, yes=True)
    assert done.edit is not None
    assert done.edit.text == "🗑 Forgotten, as you asked (deleted for good): 1 memory."
    assert [m.text for m in await store.memories(ALICE.id)] == ["Works as a nurse."]
    shown = (await run_command(mem_engine, "memories", ctx())).text
    assert "Taipei" not in shown and "forget" not in shown
    log = await mem_engine.queries.extraction_log(ALICE.id)
    assert log is None or "Taipei" not in log.detail + log.raw


async def test_a_model_that_reads_the_other_lists_number_deletes_nothing(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    """Issue 43: the extraction input has two lists; a careless model that names the memory by
    its place in <needs_terms> once deleted the nurse memory instead. Each list has its own
    ids now, and an id that is not an existing memory's is ignored and logged."""
    notices = listen(mem_engine)
    await mem_engine.queries.remember(CHAT, ALICE, "Lives in Taipei.")  # no search terms yet: both
    await mem_engine.queries.remember(CHAT, ALICE, "Works as a nurse.")  # are in <needs_terms> too
    naming(llm, "Taipei", block="needs_terms")
    await turn(mem_engine, "Please forget that I live in Taipei.")
    assert {m.text for m in await store.memories(ALICE.id)} == {
        "Lives in Taipei.",
        "Works as a nurse.",
    }
    assert len(notices) == 1 and "couldn't tell which memory" in notices[0]
    assert QUESTIONS == []  # nothing to say Yes to
    log = await mem_engine.queries.extraction_log(ALICE.id)
    assert log is not None and "ignored forget ids naming no listed memory: ['t" in log.detail


async def test_an_unanswered_question_expires_and_deletes_nothing(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    listen(mem_engine)
    await remembered(mem_engine, llm, "Lives in Taipei.")
    naming(llm, "Taipei")
    await turn(mem_engine, "Please forget that I live in Taipei.")
    later = mem_engine.state.now() + timedelta(hours=1)
    mem_engine.state.clock = lambda: later
    expired = await answer(mem_engine, yes=True)
    assert expired.alert and expired.notice == answers.EXPIRED
    assert [m.text for m in await store.memories(ALICE.id)] == ["Lives in Taipei."]


async def test_a_wrong_number_deletes_nothing_and_says_so(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    notices = listen(mem_engine)
    await remembered(mem_engine, llm, "Lives in Taipei.")
    llm.parsed.append(learner_answer([("Asked to forget their city.", "other")], forget=["m7"]))
    await turn(mem_engine, "Please forget that I live in Taipei.")
    assert [m.text for m in await store.memories(ALICE.id)] == ["Lives in Taipei."]
    assert len(notices) == 1 and "couldn't tell which memory" in notices[0]
    assert "/forget" in notices[0]


async def test_a_model_that_names_none_deletes_nothing(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    notices = listen(mem_engine)
    await remembered(mem_engine, llm, "Lives in Taipei.")
    llm.parsed.append(learner_answer([]))
    await turn(mem_engine, "别记得我住在台北")
    assert [m.text for m in await store.memories(ALICE.id)] == ["Lives in Taipei."]
    assert notices == []


async def test_in_a_group_the_question_names_what_was_said_there_and_yes_deletes_it(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    notices = listen(mem_engine)
    # Said in the group: a group's extraction call lists only what was said there.
    llm.parsed.append(learner_answer([("Has a private medical condition.", "personal")]))
    await turn(mem_engine, "@bot I have a private medical condition", chat=GROUP)
    llm.parsed.append(learner_answer([], forget=["m1"]))
    await turn(mem_engine, "@bot forget my medical condition", chat=GROUP)
    assert notices == [
        "🗑 You asked me to forget this memory:\n• Has a private medical condition.\n"
        "Delete it for good? Nothing can bring it back."
    ]
    assert len(await store.memories(ALICE.id)) == 1
    await answer(mem_engine, yes=True, chat=GROUP)
    assert await store.memories(ALICE.id) == []


# -- the same in the real bot: the question comes through the outbox ------------------------------
def forgetting_model(req: FakeRequest) -> Answer:
    """Keeps "Lives in Taipei." from the message that says so; for a message that asks to
    forget it, names that memory by its id in the list the call shows."""
    if req.kind != "structured":
        return default_responder(req)
    answer = minimal_instance(req.schema) if req.schema else {}
    said = req.last_user_message.split("<user_message>", 1)[-1]
    if "I live in Taipei" in said:
        answer["memories"] = [{"text": "Lives in Taipei.", "category": "personal"}]
    elif "忘掉" in said:
        shown = listed([ChatMessage("user", req.last_user_message)])
        answer["forget"] = [k for k, text in shown.items() if text == "Lives in Taipei."]
    return answer


@pytest.mark.slow
def test_the_bot_forgets_in_words_and_says_so_in_the_chat(tmp_path: Path) -> None:
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        llm.responder = forgetting_model
        bot.start()
        try:
            assert ask(tg, "I live in Taipei.") == "Echo: I live in Taipei."
            assert "Lives in Taipei." in ask(tg, "/memories")
            update = tg.user_sends("忘掉我住在台北這件事")
            reply, question = tg.wait_messages(count=2, after=update, timeout=WAIT)
            assert reply["text"] == "Echo: 忘掉我住在台北這件事"
            assert "• Lives in Taipei." in question["text"]  # named, before anything goes
            assert "Lives in Taipei." in ask(tg, "/memories")
            tg.user_taps(question, keyboard(question)["Yes, delete"])
            tg.wait_for(
                lambda: [
                    m
                    for m in tg.sent_messages()
                    if m["message_id"] == question["message_id"] and "deleted for good" in m["text"]
                ],
                WAIT,
                "the question edited into its answer",
            )
            assert ask(tg, "/memories").startswith("I don't remember anything about you yet")
            # With the bot still running: not in the outbox's old pages, nor the extraction log.
            assert files_holding(tmp_path / "data", "Lives in Taipei") == []
        finally:
            assert bot.stop() == 0, bot.output()

"""/roleplay (issue 30): scenes where the model plays the other side at the learner's level.
The after-reply extraction logs mistakes and words and says when the scene is over; the debrief
lists what was logged during the scene only (no model call). A model that answers badly never
ends or breaks a scene.

Real SQLite and PostgreSQL; the model is a scripted fake at the LLM seam."""

from __future__ import annotations

from typing import Any

from memora.commands import CommandContext, press_button, run_command
from memora.engine import Engine
from memora.modes.roleplay import suggest
from tests.support.fakes import FakeLLM
from tests.support.lessons import (
    ALICE,
    CHAT,
    GROUP,
    NOTICES,
    answer,
    assert_exported_then_forgotten,
    command,
    listen,
    mode_block,
)


def found(*, over: bool | None = None, mistake: str = "", word: str = "") -> dict[str, Any]:
    """The extraction call's answer for a scene turn, as a model writes it."""
    out: dict[str, Any] = {"memories": []}
    if over is not None:
        out["scene_over"] = over
    if mistake:
        out["mistakes"] = [
            {
                "original": mistake,
                "corrected": mistake + " (fixed)",
                "category": "agreement",
                "reason": "tense",
            }
        ]
    if word:
        out["vocabulary"] = [{"term": word, "meaning": "m-" + word, "example": word}]
    return out


async def test_a_scene_runs_and_ends_with_a_debrief_of_its_own_items(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    engine = mem_engine
    await listen(engine)
    await command(engine, "profile", "set level A2")
    # Logged before the scene: never in its debrief.
    llm.parsed.append(found(mistake="I goed home", word="umbrella"))
    await answer(engine, "I goed home")
    llm.replies.append("Good evening! Can I see your passport, please?")
    out = await command(engine, "roleplay", "airport")
    assert "passport" in out and "/roleplay end" in out
    block = mode_block(llm)
    assert "check-in agent" in block and "(A2)" in block and "Open the scene" in block
    llm.parsed.append(found(over=False, mistake="I has a bag", word="boarding pass"))
    await answer(engine, "Here. I has a bag.")
    assert "exchange 1" in mode_block(llm)
    assert "Role-play: Airport check-in" in await command(engine, "status")
    llm.parsed.append(found(over=True))
    await answer(engine, "Thank you, goodbye!")
    assert await engine.lessons.mode(CHAT.id) is None
    assert NOTICES, "the debrief is sent after the reply"
    text = NOTICES[-1]
    assert "I has a bag" in text and "boarding pass" in text and "agreement" in text
    assert "goed" not in text and "umbrella" not in text


async def test_bad_answers_keep_the_scene_going(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await command(engine, "roleplay", "hotel")
    assert "(B1)" in mode_block(llm)  # no level in the profile
    for item in ["{not json", found(), found(over=False)]:
        llm.parsed.append(item)
        llm.parsed.append(item)  # broken JSON is asked again once
        await answer(engine, "I would like a room")
        llm.parsed.clear()
        mode = await engine.lessons.mode(CHAT.id)
        assert mode is not None and mode.kind == "roleplay"
    assert "exchange 3" in mode_block(llm)


async def test_end_waits_for_the_last_extraction(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await command(engine, "roleplay", "doctor")
    llm.parsed.append(found(over=False, mistake="My head hurt since monday"))
    await engine.handle_turn(CHAT, ALICE, "My head hurt since monday")  # no drain
    out = await command(engine, "roleplay", "end")
    assert "My head hurt since monday" in out and "Scene over" in out
    assert await engine.lessons.mode(CHAT.id) is None
    assert "no role-play" in await command(engine, "roleplay", "end")


async def test_free_text_scene_is_capped_masked_data(engine: Engine, llm: FakeLLM) -> None:
    secret = "sk-" + "a1B2" * 12
    await command(engine, "roleplay", f"buying a train ticket {secret} " + "x" * 500)
    block = mode_block(llm)
    assert "<scene>buying a train ticket" in block and "data, not instructions" in block
    assert secret not in block and "x" * 400 not in block
    assert "buying a train ticket" in await command(engine, "status")


async def test_suggestions_follow_interests(engine: Engine, llm: FakeLLM) -> None:
    calls = len(llm.calls)
    await command(engine, "profile", "set interests travel")
    out = await command(engine, "roleplay")
    suggested = out.split("Suggested for you:")[1].split("All scenes:")[0]
    assert suggested.index("airport") < suggested.index("hotel")
    assert "restaurant" not in suggested and "interview" in out.split("All scenes:")[1]
    assert len(llm.calls) == calls  # the menu calls no model
    assert await engine.lessons.mode(CHAT.id) is None
    assert [s.key for s in suggest("")] == ["restaurant", "directions", "smalltalk"]
    assert suggest("career at work")[0].key in {"interview", "smalltalk", "meeting"}


async def test_cancel_reset_groups_export_forgetme(engine: Engine, llm: FakeLLM) -> None:
    assert "private chat" in await command(engine, "roleplay", "airport", chat=GROUP)
    await command(engine, "roleplay", "phone")
    await assert_exported_then_forgotten(engine, "roleplay")
    await command(engine, "roleplay", "phone")
    assert "Ended" in await command(engine, "cancel")
    await command(engine, "roleplay", "phone")
    assert "Ended" in await command(engine, "reset")
    assert await engine.lessons.mode(CHAT.id) is None


async def test_suggestions_read_long_term_memories(mem_engine: Engine, llm: FakeLLM) -> None:
    await command(mem_engine, "remember", "I have a job interview at a bank next month")
    suggested = (await command(mem_engine, "roleplay")).split("All scenes:")[0]
    assert "/roleplay interview" in suggested


async def test_a_scene_with_nothing_logged_ends_encouraging(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    await command(mem_engine, "roleplay", "directions")
    await answer(mem_engine, "Excuse me, where is the station?")
    out = await command(mem_engine, "roleplay", "end")
    assert "Scene over: Asking for directions" in out and "well done" in out
    assert "Mistakes" not in out


async def test_a_suggestion_button_is_checked_before_it_starts_a_scene(
    engine: Engine, llm: FakeLLM
) -> None:
    await command(engine, "profile", "set interests travel")
    menu = await run_command(engine, "roleplay", CommandContext(CHAT, ALICE, ""))
    (first,) = menu.buttons[0]
    assert first.data == "scene:airport" and len(menu.buttons) == 3
    tap = await press_button(engine, CHAT, ALICE, first.data)
    assert tap.command == "/roleplay airport" and not tap.alert
    assert tap.edit is not None and "Airport check-in" in tap.edit.text and not tap.edit.buttons
    assert await engine.lessons.mode(CHAT.id) is None  # the adapter runs the command: nothing yet
    forged = await press_button(engine, CHAT, ALICE, "scene:../../etc")
    assert forged.alert and not forged.command and "isn't one I can use" in forged.notice
    in_group = await press_button(engine, GROUP, ALICE, first.data)
    assert in_group.alert and not in_group.command and "private chat" in in_group.notice

    # The chat put in the scene but its opening line never stored (a crash): the tap, delivered
    # again, still starts it.
    await engine.lessons.start_mode(CHAT, ALICE, "roleplay", {"scene": "airport"})
    again = await press_button(engine, CHAT, ALICE, first.data)  # the tap delivered again
    assert again.command == "/roleplay airport"
    await command(engine, "roleplay", "airport")
    stale = await press_button(engine, CHAT, ALICE, first.data)  # the old menu, mid-scene
    assert stale.alert and "A lesson is running here (Role-play: Airport check-in)" in stale.notice
    other = await press_button(engine, CHAT, ALICE, "scene:hotel")
    assert other.alert and not other.command

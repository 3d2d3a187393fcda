"""The extraction call as a scripted model answers it: the wide answer, the lists the call
shows, and an answer that names a listed memory to forget."""

from __future__ import annotations

from typing import Any

from tests.support.fakes import FakeLLM


def learner_answer(
    memories: list[tuple[str, str]],
    profile: list[tuple[str, str]] = (),  # type: ignore[assignment]
    forget: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """The extraction call's wide answer as a model writes it."""
    return {
        "memories": [{"text": t, "category": c, "replaces": None} for t, c in memories],
        "profile": [{"field": f, "value": v} for f, v in profile],
        "mistakes": [],
        "vocabulary": [],
        "forget": list(forget),
    }


def listed(messages: list[Any], block: str = "existing_memories") -> dict[str, str]:
    """A list the extraction call shows (<existing_memories> or <needs_terms>): id → text."""
    content = messages[-1].content
    if f"<{block}>" not in content:
        return {}
    shown = content.split(f"<{block}>\n", 1)[1].split(f"\n</{block}>", 1)[0]
    lines = (line.split(". ", 1) for line in shown.splitlines())
    return {label: text.split("] ", 1)[-1] for label, text in lines}


def naming(llm: FakeLLM, fact: str, block: str = "existing_memories") -> None:
    """The next extraction names the memory `fact` for `forget` by its label in `block`, as
    the call showed it ("m2"; a careless model reads "t1" from <needs_terms>)."""
    original = llm.parse

    async def parse(instructions: str, messages: list[Any], schema: Any, **kw: Any) -> Any:
        label = next(k for k, text in listed(messages, block).items() if fact in text)
        llm.parsed.append(learner_answer([("Wants me to forget it.", "other")], forget=[label]))
        llm.parse = original  # type: ignore[method-assign]
        return await original(instructions, messages, schema)

    llm.parse = parse  # type: ignore[method-assign]

"""Folding turns into the rolling summary: one summary call, then the key facts it dropped are
pinned to it as quotes (memora.shortterm.keyfacts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memora.llm import LLM, CallInfo, ChatMessage, Usage
from memora.shortterm.instructions import SUMMARY_INSTRUCTIONS
from memora.shortterm.keyfacts import pin_missing
from memora.storage import StoredMessage


@dataclass(frozen=True)
class Fold:
    """A new summary covering history[0:summarized_count]."""

    summary: str
    summarized_count: int
    tokens: int  # input + output of the summary call
    pinned: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # the summary call's, as the provider said


def transcript(messages: list[StoredMessage]) -> str:
    lines = []
    for m in messages:
        who = (m.user_name or "learner") if m.role == "user" else "Memora"
        lines.append(f"{who}: {m.content}")
    return "\n".join(lines)


async def summarize(
    llm: LLM,
    old_summary: str,
    messages: list[StoredMessage],
    covered_until: int,
    learner: str | None = None,
) -> Fold:
    """Fold `messages` into the summary with one LLM call; pin key facts the model dropped.
    `learner`: the provider identifier of the learner whose turn asked for it."""
    prompt = (
        f"Existing summary:\n{old_summary or '(empty)'}\n\nNew messages:\n{transcript(messages)}"
    )
    done = await llm.complete(
        SUMMARY_INSTRUCTIONS,
        [ChatMessage("user", prompt)],
        call=CallInfo("summary", learner),
    )
    new_summary = done.text.strip()
    sources = [m.content for m in messages if m.role == "user"]
    pinned_summary, missing = pin_missing(new_summary, sources, old_summary)
    return Fold(pinned_summary, covered_until, done.usage.total_tokens, missing, done.usage)

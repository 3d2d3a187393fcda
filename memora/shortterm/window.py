"""The context of one reply inside the input-token budget: the summary, the recent-turn window,
the profile, memories and lesson blocks, folding the oldest turns into the summary while over."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memora.errors import OverBudget
from memora.llm import LLM, ChatMessage
from memora.shortterm.folding import Fold, summarize
from memora.shortterm.instructions import (
    MEMORY_BLOCK,
    MODE_BLOCK,
    PROFILE_BLOCK,
    SUMMARY_BLOCK,
    framed,
)
from memora.shortterm.tokens import TokenCounter
from memora.storage import StoredMessage


def label(m: StoredMessage, group: bool) -> ChatMessage:
    """A stored message as the model sees it; in groups user messages carry the speaker."""
    if m.role == "user" and group and m.user_name:
        return ChatMessage("user", f"[{m.user_name}] {m.content}")
    return ChatMessage("assistant" if m.role == "assistant" else "user", m.content)


@dataclass
class Window:
    """What the context builder works on: summary state and the not-yet-summarized messages."""

    summary: str
    summarized_count: int
    pending: list[StoredMessage]  # history[summarized_count:], complete user/assistant pairs

    def recent(self, max_turns: int) -> list[StoredMessage]:
        keep = max_turns * 2
        return self.pending[-keep:] if keep else []

    def backlog(self, max_turns: int) -> list[StoredMessage]:
        """Messages that left the window but are not yet in the summary."""
        keep = max_turns * 2
        return self.pending[: max(0, len(self.pending) - keep)]


@dataclass(frozen=True)
class BuiltContext:
    messages: list[ChatMessage]
    counted: int
    folds: list[Fold]
    memories_dropped: int


def assemble(
    memory_lines: list[str],
    summary: str,
    recent: list[ChatMessage],
    current: ChatMessage,
    profile_lines: Sequence[str] = (),
    mode_lines: Sequence[str] = (),
    note: str = "",
) -> list[ChatMessage]:
    """The request's messages. Every block of learner text (profile, memories, the summary with
    its pinned quotes) is quoted as data between its tags; the lesson mode's lines are Memora's
    own (a lesson quotes any learner text in them itself)."""
    out: list[ChatMessage] = []
    if profile_lines:  # first: the most stable block, and the one the tutor always needs
        profile = framed("profile", "\n".join(profile_lines))
        out.append(ChatMessage("developer", PROFILE_BLOCK + profile))
    if memory_lines:
        memories = framed("memories", "\n".join(memory_lines))
        out.append(ChatMessage("developer", MEMORY_BLOCK + memories))
    if summary:
        out.append(ChatMessage("developer", SUMMARY_BLOCK + framed("summary", summary)))
    out.extend(recent)
    if note:  # a once-only note from Memora (memora.engine.followups)
        out.append(ChatMessage("developer", note))
    if mode_lines:  # last before the message: what this reply must do in the lesson
        out.append(ChatMessage("developer", MODE_BLOCK + "\n".join(mode_lines)))
    out.append(current)
    return out


async def build_context(
    *,
    window: Window,
    current: ChatMessage,
    memory_lines: list[str],
    instructions: str,
    counter: TokenCounter,
    budget: int,
    max_recent_turns: int,
    llm: LLM,
    group: bool,
    profile_lines: Sequence[str] = (),
    mode_lines: Sequence[str] = (),
    learner: str | None = None,
    note: str = "",
) -> BuiltContext:
    """Profile + memories + summary + last turns + lesson mode + message, inside the budget.

    While over budget the oldest turn in the window is folded into the summary (together with
    any backlog before it, so the summary always covers a prefix of the history). When nothing
    is left to fold, the lowest-ranked memories are dropped, then the profile (a few lines; it
    goes only when the message would not fit otherwise); then OverBudget is raised. The lesson
    mode's block (placement, a scene, practice) is never dropped: the reply is that lesson's.
    `learner`: the provider identifier the folds are sent with.
    """
    alone = await counter.count(instructions, [current])
    if alone > budget:  # no fold can help: refuse before spending anything
        raise OverBudget(alone, budget)
    folds: list[Fold] = []
    summary, offset = window.summary, window.summarized_count
    recent = window.recent(max_recent_turns)
    backlog = window.backlog(max_recent_turns)
    lines = list(memory_lines)
    profile = list(profile_lines)
    compressed = False
    while True:
        shown = [label(m, group) for m in recent]
        msgs = assemble(lines, summary, shown, current, profile, mode_lines, note)
        counted = await counter.count(instructions, msgs)
        if counted <= budget:
            return BuiltContext(msgs, counted, folds, len(memory_lines) - len(lines))
        if len(recent) >= 2:
            to_fold = backlog + recent[:2]
            fold = await summarize(llm, summary, to_fold, to_fold[-1].seq + 1, learner)
            folds.append(fold)
            summary, offset = fold.summary, fold.summarized_count
            backlog, recent = [], recent[2:]
        elif lines:
            lines.pop()
        elif profile:
            profile = []
        elif summary and not compressed:
            # A summary that outgrew the budget is rewritten once, shorter, before giving up.
            fold = await summarize(llm, summary, [], offset, learner)
            folds.append(fold)
            summary, compressed = fold.summary, True
        else:
            raise OverBudget(counted, budget)

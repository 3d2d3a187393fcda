"""What a turn in flight leaves out of what it stores when something was deleted while it ran: the
lines of a member who asked to be forgotten (and the replies to them), the summary that may
paraphrase them, and the memories the speaker forgot (see memora.storage.erasure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memora.shortterm.instructions import MEMORY_BLOCK, SUMMARY_BLOCK, quoted
from memora.shortterm.window import label
from memora.storage import Erased, StoredMessage
from memora.types import ChatMessage

# Kept in English like the rest of a stored context (it is what the model was sent, and
# /context shows it as such).
FORGOTTEN_LINE = "[deleted: its author asked to be forgotten]"
FORGOTTEN_SUMMARY = "[summary deleted: a member asked to be forgotten]"


def without_erased(
    context: Sequence[ChatMessage],
    erased: Erased,
    *,
    pending: Sequence[StoredMessage],
    group: bool,
    memory_lines: Mapping[str, str],
) -> list[ChatMessage]:
    """`context` with the forgotten members' lines and the replies to them masked, the summary
    dropped when a member was forgotten, and the forgotten memories' lines left out;
    `pending` is the window the context was built from, `memory_lines` maps the memories in
    it to their lines."""
    gone_seqs = {
        seq
        for m in pending
        if m.role == "user" and m.user_id in erased.members
        for seq in (m.seq, m.seq + 1)  # the reply goes with the message (one turn)
    }
    gone = {label(m, group).content for m in pending if m.seq in gone_seqs}
    # the memory lines as the block quotes them (memora.shortterm.instructions.framed)
    gone_lines = {quoted(line) for mid, line in memory_lines.items() if mid in erased.memories}
    out: list[ChatMessage] = []
    for m in context:
        if m.role in ("user", "assistant") and m.content in gone:
            out.append(ChatMessage(m.role, FORGOTTEN_LINE))
        elif m.role == "developer" and erased.members and m.content.startswith(SUMMARY_BLOCK):
            out.append(ChatMessage("developer", FORGOTTEN_SUMMARY))
        elif m.role == "developer" and gone_lines and m.content.startswith(MEMORY_BLOCK):
            kept = [ln for ln in m.content.split("\n") if ln not in gone_lines]
            out.append(ChatMessage("developer", "\n".join(kept)))
        else:
            out.append(m)
    return out

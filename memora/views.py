"""Debug views as data, with one plain-text rendering shared by every adapter."""

from __future__ import annotations

from dataclasses import dataclass, field

from memora.i18n import _, ngettext
from memora.llm import ChatMessage
from memora.storage import StoredMessage, TurnUsage


@dataclass(frozen=True)
class Document:
    """A file to send instead of (or with) text: exports and very long views."""

    filename: str
    content: bytes
    caption: str = ""


def _reported(usage: TurnUsage) -> str:
    """The input tokens the server reported, or "not reported" for a reply that went out with
    none (llama.cpp's server streams without usage): a 0 there would read as a free request."""
    if usage.actual_input == 0 and usage.counted_input > 0:
        return _("not reported")
    return str(usage.actual_input)


@dataclass(frozen=True)
class TurnStats:
    """The per-turn memory status line (the seed's figures): the turn's usage plus context."""

    usage: TurnUsage
    newly_summarized: int
    context_messages: int  # the system prompt included, as /context and /status count them
    session_total: int
    fold_pending: int = 0  # messages that left the window, folded after the reply (not yet)

    def render(self) -> str:
        """The line as true when it prints: a fold after the reply is pending, not done."""
        u = self.usage
        pending = f" (+{self.fold_pending} to fold after this reply)" if self.fold_pending else ""
        return (
            f"[memory] summarized +{self.newly_summarized} msgs{pending} · context "
            f"{self.context_messages} msgs · input counted {u.counted_input} / actual "
            f"{_reported(u)} · output {u.output_tokens} · summary {u.summary_tokens}"
            f"{' so far' if self.fold_pending else ''} · memories used {u.memories_used} · "
            f"session total {self.session_total}"
        )


@dataclass(frozen=True)
class Button:
    """A button under a reply (Telegram: an inline keyboard button); `data` comes back on a tap."""

    label: str
    data: str


@dataclass(frozen=True)
class Reply:
    """What the engine answers: text for the user, plus optional figures, a document, a picture
    (PNG bytes), rows of buttons, or `private`: in a group, deliver it to the caller's private
    chat instead (their review cards are theirs alone)."""

    text: str
    ok: bool = True
    stats: TurnStats | None = None
    document: Document | None = None
    stored: bool = False  # the turn was answered and stored
    markdown: bool = False  # `text` is the model's Markdown: adapters render it (else plain)
    note: str = ""  # a plain line shown above the text ("✅ Saved: …", "🎤 I heard: …")
    buttons: tuple[tuple[Button, ...], ...] = ()
    photo: bytes | None = None
    private: bool = False

    @property
    def plain(self) -> str:
        """Note and text as one plain text, for adapters that show no formatting."""
        return f"{self.note}\n\n{self.text}" if self.note else self.text


@dataclass(frozen=True)
class ButtonAnswer:
    """What a tap on a button does: a short notice to the tapper (an alert for errors), the
    tapped message replaced by `edit`, and `then` sent after it. `command` is a command line
    the adapter then runs as if the tapper had typed it in that chat (a scene button is a
    shortcut for `/roleplay <scene>`, whose opening line is a turn)."""

    notice: str = ""
    alert: bool = False
    edit: Reply | None = None
    then: Reply | None = None
    command: str = ""


def render_messages(title: str, messages: list[ChatMessage]) -> str:
    if not messages:
        return f"{title}\n" + _("(empty)")
    body = "\n\n".join(f"[{i}] {m.role}: {m.content}" for i, m in enumerate(messages, 1))
    n = len(messages)
    head = ngettext("{title} ({n} message)", "{title} ({n} messages)", n).format(title=title, n=n)
    return f"{head}\n\n{body}"


def render_history(messages: list[StoredMessage], summarized: int) -> str:
    if not messages:
        return _("History\n(empty — say something!)")
    lines = []
    for m in messages:
        who = (m.user_name or _("you")) if m.role == "user" else "Memora"
        mark = "·" if m.seq < summarized else " "
        lines.append(f"{mark}{m.seq + 1}. {who}: {m.content}")
    n = len(messages)
    head = ngettext(
        "History ({n} message; · = folded into the summary)",
        "History ({n} messages; · = folded into the summary)",
        n,
    ).format(n=n)
    return head + "\n\n" + "\n".join(lines)


@dataclass(frozen=True)
class Status:
    history_messages: int
    summarized_messages: int
    last_context_messages: int
    summary_available: bool
    memory_count: int | None
    last: TurnUsage
    session: TurnUsage
    extraction_status: str
    summary_error: str
    embedding_model: str
    extra: dict[str, str] = field(default_factory=dict)

    def _by_call(self, part: str) -> str:
        """The last turn's cached input or reasoning tokens (`part`), by call."""
        u = self.last
        return _("reply {reply} · summary {summary} · extraction {extraction}").format(
            reply=getattr(u, f"reply_{part}"),
            summary=getattr(u, f"summary_{part}"),
            extraction=getattr(u, f"extraction_{part}"),
        )

    def render(self) -> str:
        t = self.last.transcription_tokens
        rows = [
            (_("History messages"), str(self.history_messages)),
            (_("Summarized messages"), str(self.summarized_messages)),
            (_("Last context messages"), str(self.last_context_messages)),
            (_("Summary available"), _("yes") if self.summary_available else _("no")),
            (
                _("Long-term memories"),
                _("off") if self.memory_count is None else str(self.memory_count),
            ),
            (_("Last turn: counted input tokens"), str(self.last.counted_input)),
            (_("Last turn: actual input tokens"), _reported(self.last)),
            (_("Last turn: output tokens"), str(self.last.output_tokens)),
            (_("Last turn: summary tokens"), str(self.last.summary_tokens)),
            (_("Last turn: extraction tokens"), str(self.last.extraction_tokens)),
            (_("Last turn: embedding tokens"), str(self.last.embedding_tokens)),
            (_("Last turn: cached input tokens"), self._by_call("cached")),
            (_("Last turn: reasoning tokens"), self._by_call("reasoning")),
            (_("Last turn: memories used"), str(self.last.memories_used)),
            (
                _("Last turn: transcription"),
                ngettext("{tokens} token, {seconds} s", "{tokens} tokens, {seconds} s", t).format(
                    tokens=t, seconds=self.last.transcription_seconds
                ),
            ),
            (_("Last extraction"), self.extraction_status),
            (_("Embedding model"), self.embedding_model),
            (_("Session total tokens"), str(self.session.total)),
        ]
        if self.summary_error:
            rows.append((_("Last summary error"), self.summary_error + _(" (retried next turn)")))
        rows += list(self.extra.items())
        width = max(len(k) for k, _v in rows)
        return _("Status") + "\n" + "\n".join(f"{k.ljust(width)} : {v}" for k, v in rows)

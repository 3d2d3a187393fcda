"""Replies rendered for Telegram: Markdown → safe HTML, splitting below 4096, files for long views.

Pure functions first (conversion, splitting, planning); the one sending function at the end never
lets a formatting error lose a reply: on "can't parse entities" it resends the same chunk as plain
text. It can also finish a streamed reply by editing the message that showed it into the first
chunk.
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any

from telegram import InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import MessageLimit, ParseMode
from telegram.error import BadRequest, TelegramError

from memora.i18n import N_, _, ngettext
from memora.views import Document, Reply

log = logging.getLogger(__name__)

MAX_TEXT = int(MessageLimit.MAX_TEXT_LENGTH)  # 4096, counted in UTF-16 code units
MAX_CAPTION = int(MessageLimit.CAPTION_LENGTH)  # 1024
MAX_MESSAGES = 5  # beyond this many messages' worth, a long text goes out as a .txt file
EMPTY_ANSWER = N_("(The answer came back empty — please try again or rephrase.)")

# -- Markdown → Telegram HTML --------------------------------------------------------------------
_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use marks around stashed, already-safe HTML
_STASHED = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
_FENCE = re.compile(r"```(?:([\w+#.-]+)[ \t]*\n)?(.*?)```", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:https?://|tg://|mailto:)[^\s)]+)\)")
_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_BULLET = re.compile(r"^([ \t]*)[*+-][ \t]+", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)([^\n<>]*?\S)\*\*|__(?=\S)([^\n<>]*?\S)__")
_STRIKE = re.compile(r"~~(?=\S)([^\n<>~]*?\S)~~")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=[^\s*])([^*\n<>]*?[^\s*])\*(?![\w*])"
    r"|(?<![\w_])_(?=[^\s_])([^_\n<>]*?[^\s_])_(?![\w_])"
)
_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)[^>]*>")


def escape(text: str) -> str:
    """Escape the three characters Telegram's HTML parse mode reserves."""
    return html.escape(text, quote=False)


def markdown_to_html(markdown: str) -> str:
    """The model's Markdown as Telegram HTML: everything escaped, then bold, italic, strike,
    inline code, code blocks, links and headings. Anything that would not nest cleanly falls
    back to the escaped text, so the result always parses."""
    text = markdown.replace(_OPEN, "").replace(_CLOSE, "")
    stash: list[str] = []

    def keep(fragment: str) -> str:
        stash.append(fragment)
        return f"{_OPEN}{len(stash) - 1}{_CLOSE}"

    def fence(m: re.Match[str]) -> str:
        lang, body = m.group(1), m.group(2).strip("\n")
        if not body.strip():
            return keep(escape(body))
        if lang:
            return keep(f'<pre><code class="language-{escape(lang)}">{escape(body)}</code></pre>')
        return keep(f"<pre>{escape(body)}</pre>")

    def link(m: re.Match[str]) -> str:
        label, url = m.group(1), m.group(2)
        return keep(f'<a href="{html.escape(url, quote=True)}">{escape(label)}</a>')

    def heading(m: re.Match[str]) -> str:
        title = m.group(1).replace("**", "").replace("__", "")
        return f"<b>{title}</b>"

    text = _FENCE.sub(fence, text)
    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{escape(m.group(1))}</code>"), text)
    text = _LINK.sub(link, text)
    text = escape(text)
    text = _HEADING.sub(heading, text)
    text = _BULLET.sub(lambda m: f"{m.group(1)}• ", text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STASHED.sub(lambda m: stash[int(m.group(1))], text)
    if not is_balanced(text):
        return escape(markdown)
    return text


def is_balanced(fragment: str) -> bool:
    """Every tag closed, in order (what Telegram's HTML parser insists on)."""
    stack: list[str] = []
    for m in _TAG.finditer(fragment):
        closing, name = m.group(1), m.group(2).lower()
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def html_to_plain(fragment: str) -> str:
    """What the user would have seen: tags dropped, entities decoded."""
    return html.unescape(_TAG.sub("", fragment))


# -- splitting ------------------------------------------------------------------------------------
def tg_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


# Preferred places to cut, best first: paragraph, line, sentence, any whitespace.
_BOUNDARIES = (
    re.compile(r"\n(?:[ \t]*\n)+"),
    re.compile(r"\n"),
    re.compile(r"(?<=[.!?…])[ \t]+|(?<=[。！？])"),
    re.compile(r"[ \t]+"),
)
_UNSAFE = re.compile(r"<[^>]*>|&#?\w+;")  # never cut inside a tag or an entity
_HTML_RESERVE = 64  # room for the closing tags appended to a cut chunk


def prefix_fits(text: str, budget: int) -> int:
    """The longest prefix (in code points) whose Telegram length is within budget."""
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > budget:
            return i
    return len(text)


def _cut(piece: str, budget: int, *, is_html: bool) -> tuple[int, int]:
    """Where to end this chunk and where the next one starts."""
    hi = prefix_fits(piece, budget)
    unsafe: set[int] = set()
    if is_html:
        for m in _UNSAFE.finditer(piece, 0, hi + MAX_TEXT):  # a tag may straddle hi
            unsafe.update(range(m.start() + 1, m.end()))
    floor = hi // 2  # a boundary in the first half would make tiny chunks: try the next kind
    for pattern in _BOUNDARIES:
        best: tuple[int, int] | None = None
        for m in pattern.finditer(piece, floor, hi + 1):
            if 0 < m.start() <= hi and m.start() not in unsafe and m.end() not in unsafe:
                best = (m.start(), m.end())
        if best is not None:
            return best
    cut = hi
    while cut > 0 and cut in unsafe:
        cut -= 1
    if cut <= 0:  # one tag longer than the budget: impossible for our HTML, but progress first
        cut = max(hi, 1)
    return cut, cut


def _open_tags(fragment: str, opened: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (name, full opening tag) stack still open at the end of fragment."""
    stack = list(opened)
    for m in _TAG.finditer(fragment):
        if not m.group(1):
            stack.append((m.group(2).lower(), m.group(0)))
        elif stack and stack[-1][0] == m.group(2).lower():
            stack.pop()
    return stack


def split_text(text: str, limit: int = MAX_TEXT, *, is_html: bool = False) -> list[str]:
    """Split text into chunks of at most `limit` UTF-16 units at the best boundary available
    (paragraph, line, sentence, word, hard cut). HTML is never cut inside a tag or an entity;
    tags open at a cut are closed there and reopened in the next chunk."""
    if limit < (_HTML_RESERVE * 2 if is_html else 1):
        raise ValueError(f"limit {limit} is too small")
    chunks: list[str] = []
    rest = text.strip()
    reopen: list[tuple[str, str]] = []
    while rest:
        prefix = "".join(tag for _, tag in reopen)
        piece = prefix + rest
        if tg_len(piece) <= limit:
            chunks.append(piece)
            break
        reserve = _HTML_RESERVE if is_html else 0
        budget = limit - reserve
        while True:
            start, nxt = _cut(piece, budget, is_html=is_html)
            if start <= len(prefix):  # nothing beyond the reopened tags fits: hard progress
                start = nxt = len(prefix) + max(1, prefix_fits(rest, budget - tg_len(prefix)))
            head = piece[:start].rstrip()
            still_open = _open_tags(head, []) if is_html else []
            closing = "".join(f"</{name}>" for name, _ in reversed(still_open))
            if tg_len(head + closing) <= limit or budget <= 1:
                break
            budget -= tg_len(head + closing) - limit
        chunks.append(head + closing)
        reopen = still_open
        rest = piece[nxt:]
    visible = html_to_plain if is_html else (lambda s: s)
    return [c for c in chunks if visible(c).strip()]


# -- planning what to send ------------------------------------------------------------------------
@dataclass(frozen=True)
class Outgoing:
    """What one Reply becomes on Telegram."""

    messages: list[str]  # message texts, in order
    is_html: bool
    documents: list[Document] = field(default_factory=list)  # sent after the messages


def plan(reply: Reply, *, markdown: bool, name: str = "reply") -> Outgoing:
    """Model replies (markdown=True) as HTML; debug views as plain text. A text too long for
    MAX_MESSAGES messages goes out as a .txt document with a one-line caption, never truncated.
    A short text with a document becomes the document's caption."""
    text = reply.plain.strip()
    documents = [reply.document] if reply.document is not None else []
    if documents and text and tg_len(text) <= MAX_CAPTION:
        documents = [replace(documents[0], caption=text)]
        text = ""
    if not text:
        return Outgoing([], False, documents)
    if markdown:  # the note is plain text above the model's Markdown
        heading = f"{escape(reply.note.strip())}\n\n" if reply.note.strip() else ""
        chunks = split_text(heading + markdown_to_html(reply.text.strip()), is_html=True)
    else:
        chunks = split_text(text)
    if len(chunks) <= MAX_MESSAGES:
        return Outgoing(chunks, markdown, documents)
    note = ngettext(
        "That is long ({chars} characters, about {n} message), so here it is as a file.",
        "That is long ({chars} characters, about {n} messages), so here it is as a file.",
        len(chunks),
    ).format(chars=f"{len(text):,}", n=len(chunks))  # always thousands of characters
    return Outgoing([], False, [Document(f"{name}.txt", text.encode("utf-8"), note), *documents])


# -- sending --------------------------------------------------------------------------------------
def _parse_error(exc: BadRequest) -> bool:
    text = str(exc).lower()
    return "can't parse entities" in text or "can't find end" in text or "unsupported" in text


def not_modified(exc: BadRequest) -> bool:
    """Telegram's answer to an edit that would change nothing."""
    return "message is not modified" in str(exc).lower()


def quoting(message: Message, quote: bool) -> dict[str, Any]:
    """Arguments for reply_text: quote the learner's message (in groups) even if it has been
    deleted meanwhile, or don't quote at all."""
    if not quote:
        return {"do_quote": False}
    return {
        "reply_parameters": ReplyParameters(message.message_id, allow_sending_without_reply=True)
    }


async def _delete_quietly(message: Message) -> None:
    try:
        await message.delete()
    except TelegramError as exc:
        log.warning("could not delete message %s: %s", message.message_id, exc)


async def _edit_into(target: Message, chunk: str, *, is_html: bool) -> Message | None:
    """Make an already-sent message show this chunk (HTML, or plain text if the HTML is
    rejected); None when it cannot be edited."""
    text, mode = chunk, (ParseMode.HTML if is_html else None)
    while True:
        try:
            done = await target.edit_text(text, parse_mode=mode)
            return done if isinstance(done, Message) else target
        except BadRequest as exc:
            if not_modified(exc):  # it already shows exactly this
                return target
            if mode is not None and _parse_error(exc):
                log.warning("HTML rejected (%s); editing the chunk in as plain text", exc)
                text, mode = html_to_plain(chunk), None
                continue
            log.warning("could not edit message %s: %s", target.message_id, exc)
            return None
        except TelegramError as exc:
            log.warning("could not edit message %s: %s", target.message_id, exc)
            return None


async def send_reply(
    message: Message,
    reply: Reply,
    *,
    markdown: bool,
    name: str = "reply",
    quote: bool = False,
    edit: Message | None = None,
    markup: InlineKeyboardMarkup | None = None,
) -> list[Message]:
    """Send a Reply under `message`: chunks in order, then any document. On an HTML parse error
    the same chunk is resent as plain text.

    `edit` is a message already sent for this reply (a streamed preview): it is edited into the
    first chunk instead of sending one, so the chat ends exactly as if the reply had been sent
    normally. If it cannot be edited, or the reply has no text chunk (it goes out as a file), it
    is deleted and everything is sent as new messages.

    A reply with a photo (the progress chart) sends it first, with the text as its caption when
    it fits, else the text after it. `markup` (the page's button) goes under the last text
    message."""
    if reply.photo is not None:
        caption = reply.plain if tg_len(reply.plain) <= MAX_CAPTION else ""
        photo = await message.reply_photo(
            photo=reply.photo, caption=caption or None, parse_mode=None, **quoting(message, quote)
        )
        if caption:
            return [photo]
        rest = replace(reply, photo=None, note="", text=reply.plain)
        return [photo, *await send_reply(message, rest, markdown=False, name=name)]
    out = plan(reply, markdown=markdown, name=name)
    if not out.messages and not out.documents:  # never leave a message unanswered
        out = Outgoing([_(EMPTY_ANSWER)], False)
    sent: list[Message] = []
    chunks = list(out.messages)
    if edit is not None:
        edited = await _edit_into(edit, chunks[0], is_html=out.is_html) if chunks else None
        if edited is None:
            await _delete_quietly(edit)
        else:
            sent.append(edited)
            chunks = chunks[1:]

    def reply_to() -> dict[str, Any]:
        """Quote the learner's message once (groups), and only if it still exists."""
        return quoting(message, quote and not sent)

    for n, chunk in enumerate(chunks, 1):
        buttons = markup if n == len(chunks) else None
        if out.is_html:
            try:
                sent.append(
                    await message.reply_text(
                        chunk, parse_mode=ParseMode.HTML, reply_markup=buttons, **reply_to()
                    )
                )
                continue
            except BadRequest as exc:
                if not _parse_error(exc):
                    raise
                log.warning("HTML rejected (%s); sending the chunk as plain text", exc)
            chunk = html_to_plain(chunk)
        sent.append(
            await message.reply_text(chunk, parse_mode=None, reply_markup=buttons, **reply_to())
        )
    for document in out.documents:
        caption, extra = _caption(document.caption)
        sent.append(
            await message.reply_document(
                document=document.content,
                filename=document.filename,
                caption=caption or None,
                parse_mode=None,
                **reply_to(),
            )
        )
        for chunk in extra:
            sent.append(await message.reply_text(chunk, parse_mode=None, do_quote=False))
    return sent


def _caption(caption: str) -> tuple[str, list[str]]:
    """A caption within Telegram's limit; a longer one goes out as text after the file."""
    if tg_len(caption) <= MAX_CAPTION:
        return caption, []
    return "", split_text(caption)

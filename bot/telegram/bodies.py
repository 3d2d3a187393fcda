"""What a Telegram outbox row holds: an answer under the learner's message (`Answer`), a plain
message with inline buttons, an edit, a voice note; every text masked before it is kept."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, WebAppInfo

from memora.privacy.secretfilter import mask_secrets
from memora.views import Document, Reply


@dataclass(frozen=True)
class Answer:
    """One answer as kept in the outbox: the learner's message (to quote and to reply in its
    chat and topic), the Reply with how to render it, and the streamed preview (if any) to edit
    into its first message, whoever sends it and whenever. `user_id` names the learner it is
    for when `message` is not theirs (the menu whose button they tapped)."""

    message: Message
    reply: Reply
    markdown: bool
    name: str = "reply"
    quote: bool = False
    edit: Message | None = None
    user_id: int | None = None
    web_app: tuple[str, str] | None = None  # (label, url): the page's button under the answer

    @property
    def learner_id(self) -> int | None:
        """Whose answer this is: `user_id`, else the sender of `message`."""
        if self.user_id is not None:
            return self.user_id
        return self.message.from_user.id if self.message.from_user else None

    def encode(self) -> str:
        doc = self.reply.document
        return json.dumps(
            {
                "message": self.message.to_dict(),
                "text": mask_secrets(self.reply.text),  # kept on disk: no secret in it
                "note": mask_secrets(self.reply.note),
                "ok": self.reply.ok,
                "reply_markdown": self.reply.markdown,
                "document": None
                if doc is None
                else [doc.filename, base64.b64encode(doc.content).decode(), doc.caption],
                "markdown": self.markdown,
                "name": self.name,
                "quote": self.quote,
                "edit": None if self.edit is None else self.edit.to_dict(),
                "user_id": self.user_id,
                "web_app": None if self.web_app is None else list(self.web_app),
                "photo": None
                if self.reply.photo is None
                else base64.b64encode(self.reply.photo).decode(),
            }  # ASCII escapes: a lone surrogate in the learner's message is stored, not fatal
        )

    @classmethod
    def decode(cls, body: str, bot: Bot) -> Answer:
        data: dict[str, Any] = json.loads(body)
        doc = data["document"]
        document = None if doc is None else Document(doc[0], base64.b64decode(doc[1]), doc[2])
        return cls(
            Message.de_json(data["message"], bot),
            Reply(
                data["text"],
                ok=data["ok"],
                document=document,
                markdown=data["reply_markdown"],
                note=data["note"],
                photo=None if data.get("photo") is None else base64.b64decode(data["photo"]),
            ),
            markdown=data["markdown"],
            name=data["name"],
            quote=data["quote"],
            edit=None if data.get("edit") is None else Message.de_json(data["edit"], bot),
            user_id=data.get("user_id"),
            web_app=None if data.get("web_app") is None else tuple(data["web_app"]),
        )


Buttons = list[list[tuple[str, str]]]  # rows of (label, callback data), as kept in a body


def message_body(
    text: str,
    buttons: Buttons | None = None,
    message_id: int | None = None,
    *,
    reply_to: int | None = None,
) -> str:
    """The body of a MESSAGE row (or an EDIT row, with the message to edit); `reply_to`: the
    message it quotes (a question with buttons, asked in a group)."""
    body: dict[str, Any] = {"text": mask_secrets(text), "buttons": buttons or []}
    if message_id is not None:
        body["message_id"] = message_id
    if reply_to is not None:
        body["reply_to"] = reply_to
    return json.dumps(body)


def voice_body(message: Message, speech: bytes, *, quote: bool) -> str:
    """The body of a VOICE row: the spoken answer, under the learner's message."""
    audio = base64.b64encode(speech).decode()
    return json.dumps({"message": message.to_dict(), "voice": audio, "quote": quote})


def web_app_markup(button: tuple[str, str] | None) -> InlineKeyboardMarkup | None:
    """The page's (label, url) button as Telegram's inline keyboard (None without one)."""
    if button is None:
        return None
    label, url = button
    return InlineKeyboardMarkup([[InlineKeyboardButton(label, web_app=WebAppInfo(url))]])


def markup_of(buttons: Buttons) -> InlineKeyboardMarkup | None:
    """Rows of (label, data) as Telegram's inline keyboard (None without buttons)."""
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(label, callback_data=data) for label, data in row]
            for row in buttons
        ]
    )

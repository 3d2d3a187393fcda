"""Yes/No before a deletion that nothing can undo: /forgetme, and the memories a learner asked in
words to forget. The question is kept (storage/pending_asks.py) under a random token, and its two
buttons carry `ask:<token>:y` and `ask:<token>:n`; the tap is checked and acted on in
memora.commands.answers. Nothing is deleted on No, nor when nobody answers before ASK_TTL."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta

from memora.clock import utcnow
from memora.i18n import N_, _
from memora.storage.pending_asks import PendingAsk, PendingAsks
from memora.types import ChatRef, UserRef
from memora.views import Button

ASK_BUTTON = "ask:"
ASK_TTL = timedelta(minutes=30)
YES, NO = "y", "n"
FORGETME, FORGET = "forgetme", "forget"  # what a Yes deletes: everything, or named memories
YES_LABEL = N_("Yes, delete")
NO_LABEL = N_("No, keep it")

Buttons = tuple[tuple[Button, ...], ...]


async def ask(
    asks: PendingAsks,
    chat: ChatRef,
    user: UserRef,
    kind: str,
    now: datetime,
    memory_ids: Sequence[str] = (),
) -> Buttons:
    """Keep the question for `user` in `chat`; the Yes and No buttons that answer it."""
    token = secrets.token_urlsafe(12)
    pending = PendingAsk(token, user.id, chat.id, kind, tuple(memory_ids), utcnow(now + ASK_TTL))
    await asks.add(pending, now)
    return (
        (
            Button(_(YES_LABEL), f"{ASK_BUTTON}{token}:{YES}"),
            Button(_(NO_LABEL), f"{ASK_BUTTON}{token}:{NO}"),
        ),
    )


def read_answer(data: str) -> tuple[str, bool] | None:
    """`ask:<token>:y|n` → (token, yes); None for anything else (forged data)."""
    token, sep, answer = data.removeprefix(ASK_BUTTON).rpartition(":")
    if not data.startswith(ASK_BUTTON) or not sep or not token or answer not in {YES, NO}:
        return None
    return token, answer == YES


def yes_no(buttons: Buttons) -> tuple[str, str] | None:
    """The data of a question's Yes and No buttons; None when `buttons` are not a question (an
    adapter without buttons, the terminal, asks for a typed yes instead)."""
    found = [b.data for row in buttons for b in row if read_answer(b.data) is not None]
    if len(found) != 2:
        return None
    yes = [d for d in found if d.endswith(":" + YES)]
    no = [d for d in found if d.endswith(":" + NO)]
    return (yes[0], no[0]) if yes and no else None

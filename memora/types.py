"""The small value types every layer shares: who wrote (UserRef), where (ChatRef), and a message
as the model sees it (ChatMessage). A leaf: it imports nothing from Memora."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ChatMessage", "ChatRef", "Role", "UserRef"]

Role = Literal["system", "developer", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    """One message as sent to the model."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ChatRef:
    """Where a message came from: platform-neutral."""

    id: int
    kind: str = "private"  # "private" | "group"
    title: str = ""

    @property
    def is_group(self) -> bool:
        return self.kind != "private"


@dataclass(frozen=True)
class UserRef:
    """Who sent it."""

    id: int
    name: str = ""
    language: str = ""  # the platform's hint (Telegram's language_code); the core resolves it

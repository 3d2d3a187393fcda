"""The small value types every layer shares: who wrote (UserRef), where (ChatRef), and a message
as the model sees it (ChatMessage). A leaf: it imports nothing from Memora."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ChatMessage", "Role"]

Role = Literal["system", "developer", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    """One message as sent to the model."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}

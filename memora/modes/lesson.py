"""What every lesson mode is: a block of instructions in the reply's context, a state that moves
on with each turn (stored with the turn), an optional widening of the after-reply extraction
call, and what happens once that call has judged the turn (a grade, an estimate, a scene's end).

A mode never adds a model call: its questions, scene lines and feedback are ordinary replies,
and what it records comes from the extraction call's structured output or from stored data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import ClassVar

from memora.clock import as_utc
from memora.extraction import LearnerExtractionResult, ModeAsk
from memora.learner.service import Learner
from memora.storage import ModeRow


@dataclass(frozen=True)
class Settling:
    """What a mode may use once the extraction call has judged a turn of it."""

    learner: Learner
    now: datetime
    chat_id: int
    user_id: int
    message_id: int | None = None
    text: str = ""  # the learner's message of the turn


@dataclass(frozen=True)
class Settled:
    """What judging one turn did: the mode's new state (None: the mode is over), a notice for
    the learner (in their language; "" for none) and lines for /extraction."""

    mode: ModeRow | None
    notice: str = ""
    log: tuple[str, ...] = field(default_factory=tuple)


class Lesson(ABC):
    """One kind of lesson mode (see the module docstring)."""

    kind: ClassVar[str]

    @abstractmethod
    def lines(self, mode: ModeRow) -> list[str]:
        """The context block for the next reply, given the mode before the turn."""

    def answered(self, mode: ModeRow, reply: str) -> tuple[ModeRow, str]:
        """The mode as the turn leaves it (written with the turn), and text added under the
        model's reply ("" for none). By default: one step on."""
        return replace(mode, step=mode.step + 1), ""

    def ask(self, mode: ModeRow) -> ModeAsk | None:
        """What the extraction call is also asked about the turn that left `mode`; None: only
        the usual learner part."""
        return None

    async def settle(
        self, mode: ModeRow, found: LearnerExtractionResult | None, ctx: Settling
    ) -> Settled:
        """Act on the extraction's answer for the turn that left `mode` (`found` is None when the
        call failed or did not run: the mode must go on without it)."""
        return Settled(mode)

    @abstractmethod
    def describe(self, mode: ModeRow) -> str:
        """One line for /status and /context, in the current language."""


def new_mode(
    kind: str, chat_id: int, user_id: int, state: dict[str, object], now: datetime
) -> ModeRow:
    """A mode at its start (step 0); its start, to the microsecond, names this run of it."""
    return ModeRow(chat_id, user_id, kind, 0, dict(state), as_utc(now).isoformat())

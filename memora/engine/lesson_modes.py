"""The engine's side of lesson modes (memora.modes): which mode a chat is in, starting and
leaving one, and acting on the extraction's judgement of a mode's turn."""

from __future__ import annotations

import logging
from typing import Any

from memora.engine.lanes import Lanes
from memora.engine.people import People
from memora.engine.state import EngineState
from memora.extraction import Answered, LearnerExtractionResult, ModeAsk
from memora.i18n import speaking
from memora.learner.service import Learner
from memora.modes import LESSONS, Settling, new_mode
from memora.storage import Database, ModeRow
from memora.types import ChatRef, UserRef

log = logging.getLogger(__name__)


class LessonModes:
    """Lesson modes: start, leave, read, settle."""

    def __init__(
        self, db: Database, learner: Learner, people: People, lanes: Lanes, state: EngineState
    ) -> None:
        self.db = db
        self.learner = learner
        self.people = people
        self.lanes = lanes
        self.state = state

    async def mode(self, chat_id: int) -> ModeRow | None:
        """The lesson mode the chat is in, if any."""
        return await self.db.modes.mode(chat_id)

    async def start_mode(
        self, chat: ChatRef, user: UserRef, kind: str, state: dict[str, Any]
    ) -> ModeRow:
        """Put the chat in a new lesson mode of this kind (leaving any other)."""
        await self.db.chats.ensure_chat(chat.id, chat.kind, chat.title)
        mode = new_mode(kind, chat.id, user.id, state, self.state.clock())
        await self.db.modes.start_mode(mode)
        return mode

    async def leave_mode(self, chat_id: int) -> ModeRow | None:
        """Leave the chat's lesson mode; the mode left (None if it was in none)."""
        mode = await self.db.modes.mode(chat_id)
        if mode is not None and await self.db.modes.end_mode(chat_id, mode.started_at):
            return mode
        return None

    async def learner_level(self, user_id: int) -> str | None:
        """The learner's CEFR level in their profile, if it holds one."""
        return (await self.learner.profile(user_id, self.state.clock())).get("level")

    def describe_mode(self, mode: ModeRow | None) -> str:
        """The mode as /status and /context name it (in the current language); "" for none."""
        lesson = None if mode is None else LESSONS.get(mode.kind)
        return "" if lesson is None or mode is None else lesson.describe(mode)

    async def turn_mode(self, chat: ChatRef, user: UserRef) -> ModeRow | None:
        """The mode this learner's turn is in: the chat's, once the learner's last extraction
        has judged the previous turn (the next question is pitched from it); None if none."""
        mode = await self.db.modes.mode(chat.id)
        if mode is None or mode.user_id != user.id or mode.kind not in LESSONS:
            return None
        await self.lanes.settle(chat.id, user.id)
        return await self.db.modes.mode(chat.id)

    def mode_lines(self, mode: ModeRow | None) -> list[str]:
        return [] if mode is None else LESSONS[mode.kind].lines(mode)

    def mode_ask(self, mode: ModeRow | None) -> ModeAsk | None:
        return None if mode is None else LESSONS[mode.kind].ask(mode)

    async def settle_mode(self, done: Answered, found: LearnerExtractionResult | None) -> list[str]:
        """Act on the extraction's judgement of a mode's turn (None: there is none); log lines."""
        mode = done.mode
        if mode is None or mode.kind not in LESSONS:
            return []
        ctx = Settling(
            self.learner, self.state.clock(), done.chat.id, done.user.id, done.message_id, done.text
        )
        try:
            with speaking(await self.people.language(done.user)):
                settled = await LESSONS[mode.kind].settle(mode, found, ctx)
        except Exception as exc:
            log.exception("settling the %s turn of chat %s failed", mode.kind, done.chat.id)
            return [f"{mode.kind}: failed ({exc})"]
        if settled.mode is None:
            await self.db.modes.end_mode(mode.chat_id, mode.started_at)
        elif settled.mode != mode:
            await self.db.modes.update_mode(settled.mode)
        if settled.notice:
            await self.people.tell(done, settled.notice)
        return list(settled.log)

    async def settle_alone(self, done: Answered) -> None:
        """A mode's turn that no extraction call judges (extraction is off, or the turn is not
        extracted): the mode goes on as with a failed call."""
        await self.settle_mode(done, None)

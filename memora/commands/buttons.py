"""A tap on one of our inline buttons, checked against the tapper and the chat before anything
happens: review cards (`rv:…`, memora.learner.learner_commands), role-play scene suggestions
(`scene:…`, memora.commands.lessons) and the Yes/No before a deletion (`ask:…`,
memora.commands.answers). Any other data is forged and refused."""

from __future__ import annotations

from memora.commands.answers import press_ask
from memora.commands.lessons import SCENE_BUTTON, press_scene
from memora.engine import Engine
from memora.i18n import speaking
from memora.learner.learner_commands import review_button
from memora.privacy.confirmations import ASK_BUTTON
from memora.types import ChatRef, UserRef
from memora.views import ButtonAnswer


async def press_button(engine: Engine, chat: ChatRef, user: UserRef, data: str) -> ButtonAnswer:
    """What the tap on a button carrying `data` does, answered in the tapper's language."""
    with speaking(await engine.language(user)):
        if data.startswith(SCENE_BUTTON):
            return await press_scene(engine, chat, user, data.removeprefix(SCENE_BUTTON))
        if data.startswith(ASK_BUTTON):
            return await press_ask(engine, chat, user, data)
        return await review_button(engine.learner, user.id, data, engine.state.now())

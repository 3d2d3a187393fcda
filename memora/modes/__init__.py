"""Lesson modes, where the tutor leads: a placement test, role-play scenes, practice built from
the learner's own items. A chat is in at most one mode (table chat_modes); each kind is a
:class:`Lesson` (lesson.py) registered in :data:`LESSONS`."""

from memora.modes.lesson import Lesson, Settled, Settling, new_mode
from memora.modes.placement import Placement
from memora.modes.practice import Practice
from memora.modes.roleplay import Roleplay

LESSONS: dict[str, Lesson] = {
    lesson.kind: lesson for lesson in (Placement(), Roleplay(), Practice())
}
"""Every kind of lesson mode by its name (the `kind` stored in chat_modes)."""

__all__ = ["LESSONS", "Lesson", "Settled", "Settling", "new_mode"]

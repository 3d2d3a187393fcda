"""`Engine`: the one entry point for every adapter, composed of the parts of this package."""

from __future__ import annotations

from memora.engine.export import Export
from memora.engine.voice import VoiceTurns


class Engine(VoiceTurns, Export):
    """Runs turns: retrieve → build context in budget → reply → store → fold + extract later
    (turn.py, retrieval.py, after_reply.py, lanes.py); answers what commands ask (queries.py,
    export.py); hears and speaks (voice.py)."""

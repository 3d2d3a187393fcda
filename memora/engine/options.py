"""How an engine behaves: `EngineConfig`. Its defaults are the configuration's own (memora.config
is their one source); `EngineConfig.from_settings` carries a loaded configuration over."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memora.config import (
    ExtractionConfig,
    LearnerConfig,
    MemoryConfig,
    RemindersConfig,
    RetrievalConfig,
    Settings,
)
from memora.shortterm.instructions import TUTOR_INSTRUCTIONS

FILES_DIR = "files"  # under [storage] data_dir: learner-<id>/ per learner (Queries.learner_files)
_MEMORY = MemoryConfig()
_RETRIEVAL = RetrievalConfig()


@dataclass(frozen=True)
class EngineConfig:
    max_input_tokens: int = _MEMORY.max_input_tokens
    max_recent_turns: int = _MEMORY.max_recent_turns
    max_message_chars: int = _MEMORY.max_message_chars
    top_k: int = _RETRIEVAL.top_k
    min_score: float | None = _RETRIEVAL.min_score  # None: the embedder profile's
    use_last_turn: bool = _RETRIEVAL.use_last_turn  # the previous message, after the message's
    memory_tokens: int = _RETRIEVAL.memory_tokens  # 0: top_k and min_score alone decide
    group_memories: Literal["group", "all"] = _RETRIEVAL.group_memories
    extraction_enabled: bool = ExtractionConfig().enabled
    learner_enabled: bool = LearnerConfig().enabled
    weekly_by_default: bool = RemindersConfig().weekly  # /remind HH:MM turns the report on too
    instructions: str = TUTOR_INSTRUCTIONS
    # Where adapters keep files made for a learner (the terminal's /progress chart and /export):
    # one folder each, deleted by /forgetme. None: nowhere (nothing is written).
    files_dir: Path | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> EngineConfig:
        """The engine's part of a loaded configuration."""
        memory, retrieval = settings.memory, settings.retrieval
        return cls(
            max_input_tokens=memory.max_input_tokens,
            max_recent_turns=memory.max_recent_turns,
            max_message_chars=memory.max_message_chars,
            top_k=retrieval.top_k,
            min_score=retrieval.min_score,
            use_last_turn=retrieval.use_last_turn,
            memory_tokens=retrieval.memory_tokens,
            group_memories=retrieval.group_memories,
            extraction_enabled=settings.extraction.enabled,
            learner_enabled=settings.learner.enabled,
            weekly_by_default=settings.reminders.weekly,
            files_dir=settings.storage.data_dir / FILES_DIR,
            instructions=settings.tutor.instructions.strip() or TUTOR_INSTRUCTIONS,
        )

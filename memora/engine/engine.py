"""`Engine`: the one entry point for every adapter, a facade over the named parts of this package.
Each part is built here with what it uses; an adapter calls a turn through the facade and reaches
a part by its name for the rest (`engine.queries.memories(…)`, `engine.lessons.mode(…)`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from memora.clock import now
from memora.engine.after_reply import AfterReply
from memora.engine.export import Export
from memora.engine.followups import FollowUps
from memora.engine.lanes import Lanes
from memora.engine.lesson_modes import LessonModes
from memora.engine.options import EngineConfig
from memora.engine.people import People
from memora.engine.queries import Queries
from memora.engine.retrieval import Retrieval
from memora.engine.state import EngineState
from memora.engine.turn import Turns
from memora.engine.voice import Voice
from memora.extraction import TurnExtraction
from memora.learner.service import Learner
from memora.llm import LLM
from memora.llm.audio import Speaker, Transcriber
from memora.longterm import MemoryStore
from memora.reminders import Reminders, WeeklyReports
from memora.shortterm.tokens import TokenCounter
from memora.storage import Database
from memora.usage import Metering


class Engine:
    """Runs turns: retrieve → build context in budget → reply → store → fold + extract later.

    Its parts: `turns` (the reply path), `retrieval` (what reaches the context), `after_reply`
    (usage, the fold, then memora.extraction's run of the turn), `lanes` (locks and the order of
    work), `lessons` (lesson modes), `people` (language, limits, profile), `queries` (what
    commands read and change), `export`, `voice`; and `state` (config, clock, metering, notify),
    which every part reads as it runs: `engine.state.config = …` reaches them all.
    """

    def __init__(
        self,
        *,
        db: Database,
        llm: LLM,
        counter: TokenCounter,
        store: MemoryStore | None = None,
        config: EngineConfig | None = None,
        summary_llm: LLM | None = None,
        extraction_llm: LLM | None = None,
        clock: Callable[[], datetime] = now,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
        metering: Metering | None = None,
    ) -> None:
        self.db = db
        self.counter = counter
        self.store = store
        self.learner = Learner(db)
        self.state = EngineState(config or EngineConfig(), clock, metering)
        self.reminders = Reminders(db, learner=self.learner, clock=clock)
        self.followups = FollowUps(self.learner, store, db.asked_once)
        self.weekly = WeeklyReports(
            db, self.reminders, by_default=self.state.config.weekly_by_default
        )

        self.people = People(db, self.learner, self.state)
        self.lanes = Lanes(db)
        self.lessons = LessonModes(db, self.learner, self.people, self.lanes, self.state)
        self.retrieval = Retrieval(store, self.followups, self.people, self.state)
        extraction = None
        if store is not None:
            extraction = TurnExtraction(
                db=db,
                store=store,
                learner=self.learner,
                llm=extraction_llm or llm,
                people=self.people,
                lessons=self.lessons,
                clock=self.state.now,
            )
        self.after_reply = AfterReply(
            db=db,
            learner=self.learner,
            summary_llm=summary_llm or llm,
            extraction=extraction,
            people=self.people,
            state=self.state,
        )
        self.turns = Turns(
            db=db,
            llm=llm,
            summary_llm=summary_llm or llm,
            counter=counter,
            store=store,
            people=self.people,
            lanes=self.lanes,
            lessons=self.lessons,
            retrieval=self.retrieval,
            after_reply=self.after_reply,
            state=self.state,
        )
        self.voice = Voice(transcriber, speaker, self.people, self.turns)
        self.queries = Queries(
            db=db,
            store=store,
            learner=self.learner,
            reminders=self.reminders,
            weekly=self.weekly,
            lanes=self.lanes,
            after_reply=self.after_reply,
            state=self.state,
        )
        self.export = Export(
            db=db,
            store=store,
            learner=self.learner,
            reminders=self.reminders,
            weekly=self.weekly,
            state=self.state,
        )

        # What the adapters call most, each done by one part.
        self.handle_turn = self.turns.handle_turn
        self.import_exchange = self.turns.import_exchange
        self.voice_turn = self.voice.voice_turn
        self.drain = self.lanes.drain
        self.settle = self.lanes.settle
        self.exclusive = self.lanes.exclusive
        self.language = self.people.language
        self.memory_origin = self.state.memory_origin
        self.forget_user = self.queries.forget_user

    @property
    def has_memory(self) -> bool:
        """Whether this bot keeps long-term memories (a store is configured)."""
        return self.store is not None

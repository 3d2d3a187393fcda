"""The memory store's reads that rank: a message's memories, and the memories close to a text.

A user in the cache is ranked exactly in numpy (:func:`memora.longterm.ranking.hybrid_scores`
with the embedder's profile). A user who is not (after a restart, an eviction, another
replica's write) is loaded first when small (:data:`WAIT_FOR_LOAD`); a larger one is answered
from Chroma's filtered nearest neighbours (:data:`COLD_CANDIDATES` per query vector) while the
whole user loads in the background for the next search, so the first search after a restart
does not wait for every vector of a large user (decision 0100: 10,000 memories).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from memora.longterm.calibration import EmbedderProfile
from memora.longterm.chroma import ChromaBackend
from memora.longterm.embeddings import StoreEmbeddings, Vectors
from memora.longterm.memories import Memory, SearchHit, SearchResult, check_user
from memora.longterm.ranking import (
    Hit,
    Scores,
    context_can_matter,
    follow_up_rank,
    hybrid_scores,
    rank_scores,
    weights_for_query,
)
from memora.longterm.snapshot import UserData
from memora.longterm.user_cache import CachedUsers, snapshot

__all__ = ["COLD_CANDIDATES", "WAIT_FOR_LOAD", "MemorySearch", "one_blas_thread"]

# Chroma's nearest neighbours ranked per query vector for a user not in the cache. A user with
# no more memories than this gets exactly the ranking of a warm search.
COLD_CANDIDATES = 100
# A user with at most this many memories is loaded before the first search answers (a cost
# bound: loading and ranking 500 took ~54 ms, against the 200 ms a first search may take).
WAIT_FOR_LOAD = 500


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController  # lazily: it loads every BLAS library

    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """Numpy's BLAS on one thread for one user's matrix-vector products (10,000 × 512 at most):
    OpenBLAS otherwise splits them over every core and spins while it waits. Scoped, not
    process-wide: other code keeps its own settings."""
    return cast(contextlib.AbstractContextManager[Any], _blas().limit(limits=1, user_api="blas"))


def where(user_id: int, origin_chat: int | None) -> dict[str, Any]:
    if origin_chat is None:
        return {"user_id": user_id}
    return {"$and": [{"user_id": user_id}, {"chat_id": origin_chat}]}


@dataclass(eq=False)
class MemorySearch:
    """Ranks one user's memories for a message (see the module docstring)."""

    backend: ChromaBackend
    users: CachedUsers
    embeddings: StoreEmbeddings
    profile: EmbedderProfile

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        top_k: int,
        min_score: float,
        extra_context: str | None = None,
        origin_chat: int | None = None,
        floor: float | None = None,
    ) -> SearchResult:
        """The user's memories most relevant to the query, best first, score >= min_score.

        With `extra_context` (the learner's previous message), the message is also ranked
        together with it, for a follow-up ("那如果他們要去火車站呢"): what the message finds by
        itself at `floor` (default `min_score`; give the no-result threshold when `min_score` is
        lower) comes first, then what only the context finds (ranking.follow_up_rank), so a
        change of topic keeps its own memories first. With `origin_chat`, only memories that
        came from that chat are candidates (a group's replies use what the member said there).
        """
        check_user(user_id)
        query = " ".join(query.split())
        if not query or top_k <= 0:
            return SearchResult([], 0)
        version = await self.backend.version(user_id)
        data = self.users.cached(user_id, version)
        scope = where(user_id, origin_chat)
        if data is None:  # not in the cache
            anything, data = await self._uncached(user_id, version, scope)
            if not anything:
                return SearchResult([], 0)
        if data is not None:
            data = data.from_chat(origin_chat) if origin_chat is not None else data
            if not data.entries:
                return SearchResult([], 0)
        context = " ".join((extra_context or "").split())
        joined = f"{context}\n{query}" if context else ""
        # The previous message + the message is embedded in the message's call when the search
        # is cold (Chroma's candidates come from both vectors), each call is a round trip to a
        # service, or the user has fewer memories than top_k; else only if the message's own
        # hits leave room for it (context_can_matter).
        later = (
            bool(joined)
            and data is not None
            and len(data.entries) >= top_k
            and getattr(self.embeddings.embedder, "local", False)
        )
        variants = [query] if not joined or later else [query, joined]
        qvecs, tokens = await self.embeddings.queries(variants)
        if data is None:  # answer from Chroma, then load the user for the next search
            data = await self._candidates(self.users.loads.get(user_id), scope, qvecs, origin_chat)
            self.users.load(user_id, version)
        if not joined:
            found = self.rank(data, query, qvecs[0], top_k, min_score)
        else:
            edge = min_score if floor is None else floor
            with one_blas_thread():
                message = self.scores(data, query, qvecs[0])
            if not context_can_matter(message, edge, top_k):
                together = message  # the context cannot change the hits (follow_up_rank)
            else:
                if later:
                    more, spent = await self.embeddings.queries([joined])
                    context_vec, tokens = more[0], tokens + spent
                else:
                    context_vec = qvecs[1]
                with one_blas_thread():
                    together = self.scores(data, joined, context_vec)
            found = follow_up_rank(message, together, edge, top_k, min_score)
        hits = [SearchHit(data.entries[h.index].memory, h.score) for h in found]
        return SearchResult(hits, tokens)

    async def _uncached(
        self, user_id: int, version: str, scope: dict[str, Any]
    ) -> tuple[bool, UserData | None]:
        """For a user who is not in the cache: whether Chroma holds anything it could find (in
        `scope`), and the whole user when it is small enough to load first (None: rank
        Chroma's nearest neighbours while the load runs on)."""
        held = await self.backend.call(self.backend.held, user_id, WAIT_FOR_LOAD + 1)
        if 0 < held <= WAIT_FOR_LOAD:
            with contextlib.suppress(Exception):  # a failed load is logged (CachedUsers)
                # shielded: a search given up on leaves the load to the next read
                return True, await asyncio.shield(self.users.load(user_id, version))
        if not held or ("$and" in scope and not await self.backend.call(self.backend.any, scope)):
            self.users.load(user_id, version)  # in the background, for the next read
            return False, None
        return True, None

    async def _candidates(
        self,
        running: tuple[tuple[str, int], asyncio.Task[UserData]] | None,
        scope: dict[str, Any],
        qvecs: Vectors,
        origin_chat: int | None,
    ) -> UserData:
        """What a cold search ranks: all of the user's memories if a load has just finished,
        else Chroma's nearest neighbours. (The load starts after this search's own Chroma
        query: both at once made the first search wait for the load.)"""
        loading = running[1] if running is not None else None
        if loading is not None and loading.done() and not loading.cancelled():
            if loading.exception() is None:
                data = loading.result()
                return data.from_chat(origin_chat) if origin_chat is not None else data
        return await self.backend.call(self._nearest, scope, qvecs)

    def _nearest(self, scope: dict[str, Any], qvecs: Vectors) -> UserData:
        records = self.backend.nearest(scope, qvecs, COLD_CANDIDATES)
        return snapshot(records, self.backend.dim)

    async def similar(
        self, user_id: int, text: str, k: int = 5, *, origin_chat: int | None = None
    ) -> list[Memory]:
        """The user's k memories closest to a text, best first, with no threshold: the memories
        a new fact may repeat or update (context for the extractor); with `origin_chat`, only
        those that came from that chat."""
        check_user(user_id)
        text = " ".join(text.split())
        data = await self.users.data(user_id)
        if origin_chat is not None:
            data = data.from_chat(origin_chat)
        if not text or not data.entries or k <= 0:
            return []
        qvecs, _ = await self.embeddings.queries([text])
        hits = self.rank(data, text, qvecs[0], k, float("-inf"))
        return [data.entries[h.index].memory for h in hits]

    def scores(self, data: UserData, query: str, qvec: npt.NDArray[np.float32]) -> Scores:
        """Every candidate's fused score for one query (the caller holds one BLAS thread)."""
        return hybrid_scores(
            qvec,
            data.matrix,
            query,
            data.texts,
            dense_weight=weights_for_query(data.weight_kinds, query, self.profile),
            scale=self.profile.scale,
            lexical_gate=self.profile.lexical_gate,
            index=data.bm25,
        )

    def rank(
        self,
        data: UserData,
        query: str,
        qvec: npt.NDArray[np.float32],
        top_k: int,
        min_score: float,
    ) -> list[Hit]:
        """The user's memories ranked for one query (the one ranking: ``hybrid_rank``'s)."""
        with one_blas_thread():
            return rank_scores(self.scores(data, query, qvec), top_k, min_score)

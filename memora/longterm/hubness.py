"""Hubness reduction on the dense side of the hybrid score (memory side, CSLS-style).

Some memories sit close to almost any message a learner sends: "the user likes business
examples", "the user often drops articles", a self-introduction's worth of job and city. In an
embedding space such points are *hubs* (Radovanović et al., JMLR 2010): they come out near the
top for messages they have nothing to do with, push the memory a message really needs down the
ranking, and pass the no-result threshold for chit-chat. Cross-lingual retrieval corrects this
with CSLS (Conneau et al., "Word translation without parallel data", ICLR 2018): a candidate's
similarity is lowered by its mean similarity to its nearest neighbours among typical queries.

Here the typical queries are ``reference_messages.json`` beside this module: 400 messages of the
kinds learners send a tutor (requests, questions about words, corrections, role plays, stories
about their day, chit-chat; 繁體, 简体 and English mixed), written for this purpose by a helper
that read no learner set, no code and no figure, and about no learner in particular. A memory's
*hubness* is its mean cosine to its ``neighbours`` nearest reference messages; its cosine to a
message is lowered by ``weight × (hubness − center)`` before the dense evidence is scaled and
fused (memora.longterm.ranking.hybrid_scores). A typical memory (hubness ``center``) keeps its
cosine, a hub loses some and a memory about something learners rarely bring up gains some. The
offset depends on the memory alone, so it is computed once per memory (memora.longterm.cache:
at the load, then one row per write) and costs a search one subtraction per candidate.

Why written here: it is a top-k mean of one matrix product. The library that packages hubness
reduction (scikit-hubness) wraps nearest-neighbour indexes for scikit-learn estimators, is not
maintained, and would bring scikit-learn for these few lines.

The figures and how the constants were chosen: ``benchmarks/data/README.md``, "Hubness".
Only the model they were measured with gets a correction (:data:`CORRECTIONS`); another
embedding model ranks as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memora.longterm.embeddings import Embedder, normalise
from memora.longterm.matrix import Matrix

__all__ = [
    "CORRECTIONS",
    "REFERENCE_FILE",
    "HubCorrection",
    "Hubness",
    "hubness_for",
    "reference_messages",
]

REFERENCE_FILE = Path(__file__).with_name("reference_messages.json")


@dataclass(frozen=True)
class HubCorrection:
    """How much of a memory's hubness comes off its cosine (see the module docstring)."""

    weight: float  # the share of (hubness − center) taken off each cosine
    center: float  # a typical memory's hubness: its cosines stay as they are
    neighbours: int = 10  # the reference messages a memory's hubness is the mean cosine to

    def __post_init__(self) -> None:
        if self.weight < 0.0 or self.neighbours < 1:
            raise ValueError("HubCorrection needs weight >= 0 and neighbours >= 1")


# Chosen on development data only (benchmarks/data/README.md, "Hubness"), for LocalUSE.
CORRECTIONS: dict[str, HubCorrection] = {
    "use-multilingual-v3": HubCorrection(weight=0.75, center=0.30, neighbours=10),
}


@cache
def reference_messages() -> tuple[str, ...]:
    """The typical learner messages a memory's hubness is measured against."""
    messages = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))
    return tuple(str(m) for m in messages)


class Hubness:
    """A memory's offset: ``weight × (its mean cosine to its nearest reference messages −
    center)``, to subtract from its cosine to any message."""

    def __init__(self, reference: npt.ArrayLike, correction: HubCorrection) -> None:
        self.reference = normalise(reference)
        if correction.neighbours > len(self.reference):
            raise ValueError("more neighbours than reference messages")
        self.correction = correction

    def offsets(self, vectors: Matrix | npt.ArrayLike) -> npt.NDArray[np.float64]:
        """One offset per row of `vectors` (unit-length memory vectors)."""
        chunks = vectors.chunks() if isinstance(vectors, Matrix) else (np.asarray(vectors),)
        k = self.correction.neighbours
        parts = []
        for rows in chunks:
            rows = np.asarray(rows, dtype=np.float32).reshape(-1, self.reference.shape[1])
            sims = rows @ self.reference.T
            nearest = np.partition(sims, sims.shape[1] - k, axis=1)[:, -k:]
            parts.append(nearest.mean(axis=1, dtype=np.float64))
        hubness = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)
        out: npt.NDArray[np.float64] = self.correction.weight * (hubness - self.correction.center)
        return out

    def offset(self, vector: npt.ArrayLike) -> float:
        """The offset of one memory vector."""
        return float(self.offsets(np.asarray(vector).reshape(1, -1))[0])


# model name → its reference vectors: embedded once per process, whatever the stores
_REFERENCE_VECTORS: dict[str, npt.NDArray[np.float32]] = {}


async def hubness_for(embedder: Embedder) -> Hubness | None:
    """The correction for `embedder`'s model, None for a model it was not measured with (the
    reference messages are embedded once per process, ~0.4 s with LocalUSE)."""
    correction = CORRECTIONS.get(embedder.name)
    if correction is None:
        return None
    reference = _REFERENCE_VECTORS.get(embedder.name)
    if reference is None:
        embedded = await embedder.embed(list(reference_messages()), kind="query")
        reference = _REFERENCE_VECTORS.setdefault(embedder.name, normalise(embedded.vectors))
    return Hubness(reference, correction)

"""Each embedder's calibrated numbers, as data: ``memora/longterm/profiles/<embedder>.toml``.

A cosine means something different for every model, so the numbers that compare cosines (the
score scale, the fusion weights, the no-result threshold, the duplicate thresholds) belong to
the model that was measured. An embedder without a profile (an embeddings API, a model nobody
calibrated) gets :func:`uncalibrated`: its raw cosine, dense and lexical evidence weighed
equally, no score gate (rank, then fill the budget) and no cosine duplicate thresholds (only
the same normalised text is a duplicate).
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "LOCAL",
    "LOCAL_DEDUPE",
    "DedupeThresholds",
    "DenseScale",
    "EmbedderProfile",
    "profile_for",
    "uncalibrated",
]


@dataclass(frozen=True)
class DenseScale:
    """Maps one embedding model's cosine onto [0, 1]: ``floor`` → 0, ``ceiling`` → 1."""

    floor: float
    ceiling: float

    def __post_init__(self) -> None:
        if not self.ceiling > self.floor:
            raise ValueError("DenseScale needs ceiling > floor")


@dataclass(frozen=True)
class DedupeThresholds:
    """Cosines from which two memories the lexical guard could compare are one (see
    :func:`memora.longterm.dedupe.relation`)."""

    same_terms: float
    same_words: float
    cross_language: float
    update: float
    replace: float

    @property
    def lowest(self) -> float:
        """Below this cosine nothing but the same text is a duplicate or an update."""
        return min(self.same_terms, self.same_words, self.cross_language, self.update)


@dataclass(frozen=True)
class EmbedderProfile:
    embedder: str
    scale: DenseScale
    dense_weight: float  # a memory without search terms in the other script than the message
    same_script_dense_weight: float  # ... in the message's script
    terms_dense_weight: float  # a memory with search terms
    lexical_gate: float  # dense score (scaled) from which shared words count in full
    min_score: float  # the no-result threshold on the fused score
    dedupe: DedupeThresholds | None  # None: only the same normalised text is a duplicate

    @property
    def calibrated(self) -> bool:
        return self.dedupe is not None


def uncalibrated(embedder: str) -> EmbedderProfile:
    """The profile of an embedder nobody measured: nothing borrowed from another model."""
    return EmbedderProfile(embedder, DenseScale(0.0, 1.0), 0.5, 0.5, 0.5, 0.0, 0.0, None)


@functools.cache
def profile_for(embedder: str) -> EmbedderProfile:
    """The embedder's calibrated profile, or :func:`uncalibrated` when it has none."""
    path = resources.files(__package__).joinpath("profiles", f"{embedder}.toml")
    if not path.is_file():
        return uncalibrated(embedder)
    data = tomllib.loads(path.read_text("utf-8"))
    r = data["ranking"]
    dedupe = data.get("dedupe")
    return EmbedderProfile(
        embedder=embedder,
        scale=DenseScale(float(r["cosine_floor"]), float(r["cosine_ceiling"])),
        dense_weight=float(r["dense_weight"]),
        same_script_dense_weight=float(r["same_script_dense_weight"]),
        terms_dense_weight=float(r["terms_dense_weight"]),
        lexical_gate=float(r["lexical_gate"]),
        min_score=float(r["min_score"]),
        dedupe=DedupeThresholds(**{k: float(v) for k, v in dedupe.items()}) if dedupe else None,
    )


# The local model's profile (memora.longterm.embeddings.LocalUSE): the defaults of the pure
# ranking and duplicate functions; the store always passes its own embedder's.
LOCAL = profile_for("use-multilingual-v3")
assert LOCAL.dedupe is not None, "the local model's profile must be calibrated"
LOCAL_DEDUPE: DedupeThresholds = LOCAL.dedupe

"""Memory entries and relation texts shared by the index tests."""

from __future__ import annotations

import numpy as np

from memora.longterm.memories import Memory
from memora.longterm.snapshot import Entry

TEXTS = [
    "The user is preparing for IELTS in 2027-03.",
    "使用者正在準備雅思考試，目標 6.5 分。",
    "用户住在台北，在银行上班。",
    "The user's English level is B1.",
    "The user likes cooking and baking shows.",
    "使用者常搞混現在完成式和過去式。",
    "The user wants travel English for airports and hotels.",
    "The user has a daughter who plays the piano.",
    "用户希望多练习会议和邮件相关的对话。",
    "The user's TOEIC goal is 850 points.",
    "The user's English level is B1.",  # the same text twice: the first one is the key
]


def entry(k: int, text: str, dim: int = 8) -> Entry:
    vec = np.random.default_rng(k).standard_normal(dim).astype(np.float32)
    memory = Memory(
        id=f"m{k}",
        user_id=7,
        text=text,
        source="extracted",
        category="other",
        created_at="2026-12-01T00:00:00+00:00",
        updated_at="2026-12-01T00:00:00+00:00",
        terms=("雅思", "exam preparation") if k % 3 == 0 else (),  # indexed with the text
    )
    return Entry(memory, k, vec / np.linalg.norm(vec))


RELATION_TEXTS = [
    *TEXTS,
    "My level is B1",
    "我的英文程度是B1",
    "The user's English level is B2.",
    "使用者的英文程度是 B2。",
    "The user's TOEIC goal is 900 points.",
    "The user does not like grammar drills.",
    "The user likes grammar drills.",
    "使用者的女兒 5 歲。",
    "使用者的兒子 5 歲。",
    "The user moved to Tainan.",
    "使用者住在台北。",
    "The user lives in Taipei.",
    "The user studies 30 minutes every morning.",
    "The user wants to improve business English.",
]

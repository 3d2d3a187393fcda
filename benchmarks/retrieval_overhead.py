"""What long-term memory costs one learner with many memories: search, restart, add, RAM.

Run from the repository root (``nice -n 19`` on a shared machine)::

    .venv/bin/python -m benchmarks.retrieval_overhead --memories 10000 --queries 100 --restarts 3

One user gets --memories distinct learner facts (English, 繁體 and 简体, from templates) in a
real embedded Chroma store with the local USE embedder (the store is built once and kept under
the system temp dir; this run's writes go to a copy). Printed, median and p95, wall and CPU:

* warm search: ``MemorySearch.search`` as the reply path calls it, each message new, half with
  the learner's previous message (issue 29's bound: p95 ≤ 10 ms at 10,000 memories);
* first search after a restart: a new store object on the same files, the first search, and
  the baseline it avoids, loading the whole user before ranking (bound: ≤ 200 ms);
* add(): a new fact (text only, as /remember), one with 6 search terms and 6 situations (the
  extraction call's), and a duplicate; and the baseline the incremental indexes avoid, one
  rebuild of every per-user structure a write would otherwise redo (bound: p95 ≤ 30 ms);
* RAM: what one user's cached memories hold (tracemalloc, the load of the whole user).

Prints figures, passes or fails nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memora.longterm import MemoryStore, NewMemory
from memora.longterm.dedupe import embedding_text, normalise_text
from memora.longterm.embeddings import LocalUSE
from memora.longterm.lexical import BM25
from memora.longterm.memories import Memory
from memora.longterm.snapshot import Entry
from memora.textnorm import warm

LEVELS = ["A1", "A2", "B1", "B2", "C1", "C2"]
NOUNS_EN = """
airports hotels restaurants meetings emails interviews presentations negotiations contracts
invoices hospitals pharmacies banks taxis trains museums concerts movies podcasts novels news
weather sports football basketball tennis hiking camping cooking baking coffee tea wine gardens
pets dogs cats birds cars bicycles phones laptops software databases marketing sales finance
accounting law medicine nursing teaching science history art music guitar piano dancing yoga
shopping fashion travel visas customs luggage beaches mountains islands festivals weddings
birthdays holidays children parents grandparents neighbours colleagues customers suppliers
""".split()
NOUNS_ZH = """
機場 飯店 餐廳 會議 郵件 面試 簡報 談判 合約 發票 醫院 藥局 銀行 計程車 火車 博物館 音樂會 電影
新聞 天氣 運動 足球 籃球 網球 爬山 露營 做菜 烘焙 咖啡 茶 花園 寵物 狗 貓 汽車 腳踏車 手機 電腦
軟體 行銷 業務 財務 會計 法律 醫學 護理 教學 科學 歷史 藝術 音樂 吉他 鋼琴 跳舞 瑜伽 購物 時尚 海關
行李 海灘 山 島 節日 婚禮 生日 假期 孩子 父母 同事 客戶 机场 酒店 会议 邮件 电影 运动 电脑 软件
""".split()
GRAMMAR_EN = [
    "the present perfect", "articles", "prepositions of time", "phrasal verbs", "conditionals",
    "the passive voice", "reported speech", "relative clauses", "gerunds", "modal verbs",
]  # fmt: skip
GRAMMAR_ZH = [
    "現在完成式",
    "冠詞",
    "介系詞",
    "片語動詞",
    "假設語氣",
    "被動語態",
    "关系从句",
    "时态",
]
EXAMS = ["TOEIC", "IELTS", "TOEFL", "GEPT"]
# Situations as the extraction call writes them with a memory (memora.extraction).
SITUATIONS = [
    "ordering food", "點餐", "weekend plans", "週末計畫", "job interview", "面試",
    "small talk", "閒聊", "travel", "旅行", "meetings", "開會", "study schedule", "讀書時間",
]  # fmt: skip


def words_for(rng: random.Random) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Search terms and situations of the size the extraction call writes (6 and 6)."""
    terms = (*rng.sample(NOUNS_EN, 3), *rng.sample(NOUNS_ZH, 3))
    return terms, tuple(rng.sample(SITUATIONS, 6))


def learner_facts(n: int, seed: int = 7) -> list[str]:
    """n distinct learner facts in English, 繁體 and 简体 (different content words each)."""
    rng = random.Random(seed)

    def en() -> str:
        return rng.choice(NOUNS_EN)

    def zh() -> str:
        return rng.choice(NOUNS_ZH)

    makers = [
        lambda: f"The user wants to learn English words about {en()} and {en()}.",
        lambda: f"使用者想學和{zh()}、{zh()}有關的英文單字。",
        lambda: f"The user often talks about {en()} with {en()} at work.",
        lambda: f"The user gets {rng.choice(GRAMMAR_EN)} wrong when writing about {en()}.",
        lambda: f"使用者談到{zh()}時常搞錯{rng.choice(GRAMMAR_ZH)}。",
        lambda: f"The user's level is {rng.choice(LEVELS)} when discussing {en()}.",
        lambda: f"使用者喜歡用{zh()}和{zh()}當練習主題。",
        lambda: (
            f"The user has a {rng.choice(EXAMS)} exam about {en()} in 2027-"
            f"{rng.randint(1, 12):02d}."
        ),
        lambda: f"The user prefers role-plays set in {en()} or {en()}.",
        lambda: f"用户希望多练习{zh()}和{zh()}相关的对话。",
    ]
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        text = rng.choice(makers)()
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def learner_pool(
    n: int, embedder: LocalUSE, cache_dir: Path | None = None
) -> tuple[list[str], Any]:
    """``learner_facts(n)`` and their passage vectors as the store embeds them.

    Embedding 10,000 facts takes about two minutes on this machine, so the result is kept in
    ``cache_dir`` (default: memora-bench under the system temp dir) between runs."""
    folder = cache_dir or Path(tempfile.gettempdir()) / "memora-bench"
    path = folder / f"learner-{n}-{embedder.name}.npz"
    texts = learner_facts(n)
    if path.is_file():
        with np.load(path) as got:
            if [str(t) for t in got["texts"]] == texts:
                return texts, np.asarray(got["vectors"], dtype=np.float32)
    vectors = np.vstack(
        [
            embedder._encode([embedding_text(t) for t in texts[i : i + 500]])
            for i in range(0, n, 500)
        ]
    )
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(path, texts=np.array(texts), vectors=vectors)
    return texts, vectors


QUERIES = [
    "幫我安排適合我程度的旅遊英文練習",
    "Can you give me some practice for my TOEIC exam?",
    "我老是搞不懂現在完成式",
    "What should I say at a hotel front desk?",
    "我想準備商務英文的會議用語",
    "How do I use phrasal verbs naturally?",
    "我下個月要考雅思，口說怎麼準備？",
    "Give me three words about cooking",
    "那第二個適合我嗎？",
    "I only have twenty minutes today",
    "我在醫院上班，想學醫療英文",
    "Recommend a podcast for my level",
    "用户想练习写作，应该怎么开始？",
    "Explain articles again please",
    "今天天氣很好",
]


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


class Ms(float):
    """Wall-clock milliseconds; `cpu` the CPU milliseconds this process spent meanwhile."""

    cpu: float = float("nan")


def start() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(t: tuple[float, float]) -> Ms:
    out = Ms((time.perf_counter() - t[0]) * 1000)
    out.cpu = (time.process_time() - t[1]) * 1000
    return out


async def timed(call: Awaitable[object]) -> Ms:
    t = start()
    await call
    return since(t)


def sync_ms(fn: Callable[[], object]) -> Ms:
    t = start()
    fn()
    return since(t)


def report(name: str, ms: list[Ms]) -> None:
    cpu = [m.cpu for m in ms]
    print(
        f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {pct(ms, 95):.1f} "
        f"| {statistics.median(cpu):.1f} | {pct(cpu, 95):.1f} |"
    )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} CPUs"


USER = 123456789
STAMP = "2026-11-30T00:00:00+00:00"


async def build(folder: Path, embedder: LocalUSE, n: int) -> None:
    """One user with n memories, written in batches of 1,000 through the store's backend (the
    vectors come from learner_pool's cache), plus a neighbour with 50; kept between runs."""
    texts, vectors = learner_pool(n, embedder)
    async with MemoryStore(folder, embedder) as store:
        if await store.count(USER) == n:
            return
        t0 = time.perf_counter()
        for first in range(0, n, 1000):
            entries = [
                Entry(Memory(str(uuid.UUID(int=k + 1)), USER, texts[k], "extracted", "other",
                             STAMP, STAMP), k + 1, vectors[k])
                for k in range(first, min(n, first + 1000))
            ]  # fmt: skip
            await asyncio.to_thread(store.backend.upsert, entries)
        await store.writer.add_many(999, [NewMemory(t) for t in texts[:50]])
        print(f"built {n:,} memories in {time.perf_counter() - t0:.0f} s under {folder}")


PREVIOUS = "我推薦兩種：第一個是商務英文，第二個是旅遊英文。"


async def restarts(folder: Path, embedder: LocalUSE, queries: list[str], n: int) -> None:
    first: list[Ms] = []
    whole: list[Ms] = []
    for i in range(n):
        query = queries[i % len(queries)]
        async with MemoryStore(folder, embedder) as store:
            first.append(await timed(store.searcher.search(USER, query, top_k=3, min_score=0.14)))
            await store.memories(USER)  # the background load it started
        async with MemoryStore(folder, embedder) as store:
            t = start()
            await store.memories(USER)
            await store.searcher.search(USER, query, top_k=3, min_score=0.14)
            whole.append(since(t))
    report("first search after a restart (new store object)", first)
    report("  baseline: load the whole user, then rank", whole)


async def measure(n_memories: int, n_queries: int, n_restarts: int, keep: Path | None) -> None:
    print(f"start: {load()}")
    embedder = LocalUSE()
    embedder.warm_up()
    warm()  # the stemmer and the character table, loaded at start as the engine does
    kept = keep or Path(tempfile.gettempdir()) / "memora-bench" / f"store-{n_memories}"
    await build(kept, embedder, n_memories)
    rng = random.Random(3)
    queries = QUERIES + [rng.choice(QUERIES) for _ in range(n_queries - len(QUERIES))]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "chroma"
        shutil.copytree(kept, folder)  # this run's adds do not grow the kept store
        print("\n| what | n | median ms | p95 ms | CPU median ms | CPU p95 ms |")
        print("|---|---|---|---|---|---|")
        await restarts(folder, embedder, queries, n_restarts)
        async with MemoryStore(folder, embedder) as store:
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            await store.memories(USER)
            cached_mb = (tracemalloc.get_traced_memory()[0] - base) / 2**20
            tracemalloc.stop()
            searches = []
            for i, q in enumerate(queries):
                context = PREVIOUS if i % 2 else None
                search = store.searcher.search(USER, f"{q} ({i})", top_k=3, min_score=0.14,
                                      extra_context=context)  # fmt: skip
                searches.append(await timed(search))
            report("warm search, every message new, half with the previous one", searches)
            used = {m.text for m in await store.memories(USER)}
            fresh = [t for t in learner_facts(2 * n_memories + 400) if t not in used]
            adds = [
                await timed(store.writer.add(USER, NewMemory(t, "extracted"))) for t in fresh[:50]
            ]
            report("add() of a new fact (text only, as /remember)", adds)
            worded = []
            for t in fresh[100:150]:
                terms, situations = words_for(rng)
                item = NewMemory(t, "extracted", terms=terms, situations=situations)
                worded.append(await timed(store.writer.add_many(USER, [item])))
            report("add() of a new fact with 6 terms + 6 situations", worded)
            dups = [
                await timed(store.writer.add(USER, NewMemory(t, "extracted"))) for t in fresh[:20]
            ]
            report("add() of a duplicate", dups)
            data = store._cache.get(USER)
            assert data is not None
            rebuild = [
                sync_ms(
                    lambda: (
                        [normalise_text(t) for t in data.texts],
                        np.vstack([*data.matrix.chunks(), data.matrix.row(0)[None, :]]),
                        BM25.from_texts(data.texts),
                    )
                )
                for _ in range(3)
            ]
            report("  baseline: a write rebuilding the user (re-key, copy, BM25)", rebuild)
            stored = await store.count(USER)
    print(f"\none user with {stored:,} memories; its cached memories: {cached_mb:.0f} MB traced")
    print(f"end: {load()}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--restarts", type=int, default=10, help="first searches after a restart")
    ap.add_argument("--store", type=Path, help="keep the built store here (default: temp dir)")
    a = ap.parse_args(argv)
    asyncio.run(measure(a.memories, a.queries, a.restarts, a.store))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

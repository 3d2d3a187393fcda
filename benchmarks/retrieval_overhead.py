"""What long-term memory adds to a turn: search latency and add latency for one large user.

Run from the repository root::

    .venv/bin/python benchmarks/retrieval_overhead.py [--memories 1000] [--queries 200] [--pairs]
        [--profile]

Prints figures, passes or fails nothing. One user gets --memories varied learner facts (English,
繁體 and 简体, built from templates), stored in a real Chroma PersistentClient in a temporary
directory with the local USE embedder. Then:

* search, warm: ``MemoryStore.search`` as the reply path calls it (embed the message locally,
  score the user's cached memories: dense cosine + BM25 through ``memora.longterm.ranking``,
  filter, sort), for --queries learner messages, half of them with the previous turn as extra
  context (the messages repeat, so most of their vectors come from the store's cache of recent
  query vectors; "new messages" makes each one new, as a conversation does), and how many of
  them return the hits of sorting every memory's score (the ranking sorts only possible hits);
* search right after an add: a write updates the cache in place (write-through), but the BM25
  index over the user's texts is rebuilt on the next search;
* search, cold: after the user's cache was dropped (a restart, a user evicted from the LRU, a
  failed write): it adds one filtered Chroma ``get`` of all the user's memories and vectors;
* add: ``MemoryStore.add`` of new facts (embedding, duplicate check against the memories the
  duplicate index picks, one Chroma upsert), and of a duplicate (no write); then new facts
  with 6 search terms and 6 situations each (``add_many``, the extraction call's path: they
  are indexed and embedded with the text);
* Chroma's own filtered nearest-neighbour query, for comparison with the exact in-process scan;
* every message new, this code against the code before (interleaved on the same messages, the
  before side with the bridge as a pass over every memory and a follow-up's context always
  embedded in the message's call and scored), whether their hits agree, and the parts of such
  a search timed alone (embedding, the scores, the bridge both ways, the ranking); with
  ``--profile`` also cProfile's table of those searches (run in one thread meanwhile), and of
  ``add()`` of 50 more new facts after the timed ones (the same way).

``--pairs`` also prints the duplicate-guard table: the cosine of hand-made pairs and of 24
facts written in English and in Chinese, and what ``memora.longterm.dedupe.relation`` decides
for them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import itertools
import math
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memora.longterm.bridge as bridge_module
import memora.longterm.store as store_module
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.bridge import UNBRIDGED, bridged_coverage, units
from memora.longterm.bridge import warm as warm_bridge
from memora.longterm.cache import Entry, UserData, dense_weight
from memora.longterm.dedupe import Relation, embedding_text, normalise_text, relation
from memora.longterm.embeddings import LocalUSE
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.ranking import context_can_matter, follow_up_rank, is_follow_up, rank_scores
from memora.longterm.records import Memory

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
# Situations as the extraction call writes them with a memory (memora.longterm.extraction).
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
) -> tuple[list[str], np.ndarray]:
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
    """Wall-clock milliseconds; `cpu` holds the CPU milliseconds this process (all its threads,
    Chroma's included) spent meanwhile: a figure that a busy shared machine inflates far less."""

    cpu: float = float("nan")


def start() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(t: tuple[float, float]) -> Ms:
    out = Ms((time.perf_counter() - t[0]) * 1000)
    out.cpu = (time.process_time() - t[1]) * 1000
    return out


def report(name: str, ms: list[Ms], base: list[Ms] | None = None) -> None:
    ratio = f" ({statistics.median(ms) / statistics.median(base):.2f}× baseline)" if base else ""
    cpu = [m.cpu for m in ms]
    print(
        f"{name:<52} n={len(ms):>3}  median {statistics.median(ms):7.1f} ms"
        f"  p95 {pct(ms, 95):7.1f} ms{ratio}  | CPU median {statistics.median(cpu):6.1f}"
        f"  p95 {pct(cpu, 95):6.1f} ms"
    )


async def timed(call: Awaitable[object]) -> Ms:
    """Milliseconds until `call` (a coroutine, which starts running here) is done."""
    t = start()
    await call
    return since(t)


def sync_ms(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Ms:
    t = start()
    fn(*args, **kwargs)
    return since(t)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} CPUs"


USER = 123456789
STAMP = "2026-11-30T00:00:00+00:00"


async def build(folder: Path, embedder: LocalUSE, n: int) -> None:
    """One user with n memories, written through the store's own upsert in batches of 1,000
    (the vectors come from learner_pool's cache), plus a neighbour with 50; kept between runs."""
    texts, vectors = learner_pool(n, embedder)
    async with MemoryStore(folder, embedder) as store:
        if await store.count(USER) == n:
            return
        t0 = time.perf_counter()
        for first in range(0, n, 1000):
            entries = [
                Entry(
                    Memory(
                        str(uuid.UUID(int=k + 1)),
                        USER,
                        texts[k],
                        "extracted",
                        "other",
                        STAMP,
                        STAMP,
                    ),
                    k + 1,
                    vectors[k],
                )
                for k in range(first, min(n, first + 1000))
            ]
            await asyncio.to_thread(store._upsert_sync, entries)
        await store.add_many(999, [NewMemory(t) for t in texts[:50]])
        print(f"built {n:,} memories in {time.perf_counter() - t0:.0f} s under {folder}")


async def full_sort_hits(
    store: MemoryStore, query: str, context: str | None, top_k: int, min_score: float
) -> list[str]:
    """The ids a search returns when every memory's score is sorted (the search sorts only
    those that can be hits); a follow-up is ranked by ``ranking.follow_up_rank`` as-is."""
    data = store._cache.get(USER)
    assert data is not None
    follow_up = bool(context) and is_follow_up(query)
    variants = [query] + ([f"{context}\n{query}"] if follow_up else [])
    qvecs, _ = await store._embed(variants, "query")  # the vectors the search used (cached)
    with store_module.one_blas_thread():  # as the search: the same BLAS, the same bits
        scores = [store._scores(data, t, v) for t, v in zip(variants, qvecs, strict=True)]
    if follow_up:
        hits = follow_up_rank(scores[0], scores[1], min_score, top_k, min_score)
        return [data.entries[h.index].memory.id for h in hits]
    s = scores[0]
    order = np.lexsort((np.arange(len(s.score)), -s.dense, -s.score))
    return [data.entries[int(i)].memory.id for i in order if s.score[i] >= min_score][:top_k]


def dense_pass_bridge(
    index: BM25, query: str, weight: float, *, unbridged: frozenset[str] = UNBRIDGED
) -> np.ndarray:
    """``bridge.bridged_coverage`` as it was before it summed over postings: one pass over
    every memory per translated term and per translation (the same figures)."""
    lexical = index.coverage(tokenize(query))
    if weight <= 0.0 or len(index) == 0:
        return lexical
    extra = np.zeros(len(index), dtype=np.float64)
    rare = math.log(1.0 + (len(index) - 0.5) / 1.5)
    held: dict[str, np.ndarray] = {}
    for unit in units(query, unbridged):
        best = np.zeros(len(index), dtype=np.float64)
        for alt in unit.alternatives:
            for term in alt:
                if term not in held:
                    held[term] = index.coverage((term,)) * (index.idf(term) / rare)
            np.maximum(best, sum(held[t] for t in alt) / len(alt), out=best)
        extra += unit.share * best
    return np.clip(lexical + weight * extra, 0.0, 1.0)


@contextlib.contextmanager
def code_before(embedder: LocalUSE) -> Any:
    """The search as it was before issue 12's last changes: the bridge as a pass over every
    memory, and a follow-up's context embedded in the message's call and always scored."""
    saved = bridge_module.bridged_coverage, store_module.context_can_matter
    bridge_module.bridged_coverage = dense_pass_bridge
    store_module.context_can_matter = lambda *_: True
    embedder.local = False
    try:
        yield
    finally:
        bridge_module.bridged_coverage, store_module.context_can_matter = saved
        del embedder.local


async def new_message_stages(
    store: MemoryStore,
    embedder: LocalUSE,
    queries: list[str],
    contexts: list[str | None],
    profile: bool,
) -> list[tuple[str, list[Ms], list[Ms] | None]]:
    """Every message new: the search now and as it was, interleaved on the same messages as
    "new messages" (each search forgets the recent query vectors and the bridge's cache of
    messages first, so both sides start from a new message alike), whether their hits agree,
    and what a search spends where (each part timed alone)."""
    now: list[Ms] = []
    before: list[Ms] = []
    pairs = [(f"{q} ({i})", c) for i, (q, c) in enumerate(zip(queries, contexts, strict=True))]
    for i, (text, c) in enumerate(pairs):
        for old in (False, True) if i % 2 else (True, False):  # neither always goes first
            store._queries.clear()
            units.cache_clear()
            with code_before(embedder) if old else contextlib.nullcontext():
                (before if old else now).append(
                    await timed(store.search(USER, text, top_k=3, min_score=0.14, extra_context=c))
                )
    agree = 0
    for q, c in [*zip(queries, contexts, strict=True), *pairs]:
        got = await store.search(USER, q, top_k=3, min_score=0.14, extra_context=c)
        with code_before(embedder):
            was = await store.search(USER, q, top_k=3, min_score=0.14, extra_context=c)
        agree += [(h.memory.id, h.score) for h in got.hits] == [
            (h.memory.id, h.score) for h in was.hits
        ]
    print(f"  hits (ids and scores) equal to the code before's: {agree} of"
          f" {len(queries) + len(pairs)} (the messages repeated, then new)")  # fmt: skip

    data = store._cache.get(USER)
    assert data is not None
    one: list[Ms] = []
    both: list[Ms] = []
    alone: list[Ms] = []
    scored: list[Ms] = []
    dense: list[Ms] = []
    one_matrix: list[Ms] = []  # the same product over one contiguous copy of the matrix
    contiguous = data.matrix.array()
    postings: list[Ms] = []
    dense_pass: list[Ms] = []
    ranked: list[Ms] = []
    follow_ups = skipped = 0
    for text, c in pairs:
        one.append(sync_ms(embedder._encode, [text]))
        vec = embedder._encode([text])[0]
        with store_module.one_blas_thread():
            scored.append(sync_ms(store._scores, data, text, vec))
            scores = store._scores(data, text, vec)
            dense.append(sync_ms(data.matrix.dot, vec))
            one_matrix.append(sync_ms(lambda v=vec: contiguous @ v))
            postings.append(sync_ms(bridged_coverage, data.bm25, text, 0.5))
            dense_pass.append(sync_ms(dense_pass_bridge, data.bm25, text, 0.5))
            ranked.append(sync_ms(rank_scores, scores, 3, 0.14))
        if c and is_follow_up(text):
            follow_ups += 1
            skipped += not context_can_matter(scores, 0.14, 3)
            joined = f"{c}\n{text}"
            both.append(sync_ms(embedder._encode, [text, joined]))
            alone.append(sync_ms(embedder._encode, [joined]))
    print(f"  follow-ups whose context could not change the hits (not embedded now): {skipped}"
          f" of {follow_ups}")  # fmt: skip
    if profile:  # cProfile sees one thread: the blocking calls run inline here meanwhile
        import memora.longterm.embeddings as embeddings_module

        async def inline(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        saved = store_module.run_blocking, embeddings_module.run_blocking
        store_module.run_blocking = embeddings_module.run_blocking = inline
        profiler = cProfile.Profile()
        profiler.enable()
        for text, c in pairs:
            store._queries.clear()
            units.cache_clear()
            await store.search(USER, text, top_k=3, min_score=0.14, extra_context=c)
        profiler.disable()
        store_module.run_blocking, embeddings_module.run_blocking = saved
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue())
    return [
        ("search, warm, every message new: this code", now, before),
        ("  baseline: the code before (below)", before, None),
        (
            "    (before: the bridge a pass over every memory; a follow-up's context always"
            " embedded in the message's call and scored)",
            [],
            None,
        ),
        ("  part: embed the message (LocalUSE, one text)", one, None),
        ("  part: embed message + context, one call", both, one),
        ("  part: embed the context alone", alone, one),
        ("    (those two: the follow-ups; × the message alone)", [], None),
        ("  part: score every memory (store._scores)", scored, None),
        ("    of which: dense cosine (matrix × vector)", dense, one_matrix),
        ("    baseline: one contiguous matrix (before the chunks)", one_matrix, None),
        ("    of which: bridge summed over postings", postings, dense_pass),
        ("    baseline: bridge as a pass over every memory", dense_pass, None),
        ("  part: rank the scores (rank_scores)", ranked, None),
    ]


async def overhead(
    n_memories: int, n_queries: int, restarts: int, keep: Path | None, profile: bool = False
) -> None:
    print(f"start: {load()}")
    embedder = LocalUSE()
    embedder.warm_up()
    warm_bridge()  # the CC-CEDICT tables, built at start as the engine does (app.open_engine)
    kept = keep or Path(tempfile.gettempdir()) / "memora-bench" / f"store-{n_memories}"
    await build(kept, embedder, n_memories)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "chroma"
        shutil.copytree(kept, folder)  # this run's adds do not grow the kept store
        rng = random.Random(3)
        queries = QUERIES + [rng.choice(QUERIES) for _ in range(n_queries - len(QUERIES))]
        contexts = [
            None if i % 2 else "Assistant: 我推薦兩種：第一個是商務英文，第二個是旅遊英文。"
            for i in range(n_queries)
        ]

        # First search after a restart: a new store on the same folder, as a new process opens it.
        # Baseline: load the whole user first, then rank (what the first search did before).
        cold: list[Ms] = []
        opened: list[Ms] = []  # the store's open at start (Chroma loads its segments there)
        filled: list[Ms] = []
        first_warm: list[Ms] = []  # the first search once the load is in the cache
        weights: list[Ms] = []  # what that search built on the event loop before the load did
        whole: list[Ms] = []
        same = 0  # first searches whose hits equal the warm search's for the same message
        for i in range(restarts):
            query = queries[i % len(queries)]
            t = start()
            async with MemoryStore(folder, embedder) as store:
                opened.append(since(t))
                t = start()
                first = await store.search(USER, query, top_k=3, min_score=0.14)
                cold.append(since(t))
                filled.append(await timed(store.memories(USER)))
                t = start()
                again = await store.search(USER, query, top_k=3, min_score=0.14)  # warm now
                first_warm.append(since(t))
                loaded = store._cache.get(USER)
                assert loaded is not None
                weights.append(sync_ms(lambda d=loaded: [dense_weight(e) for e in d.entries]))
                same += [h.memory.id for h in first.hits] == [h.memory.id for h in again.hits]
            async with MemoryStore(folder, embedder) as store:
                t = start()
                await store.memories(USER)
                await store.search(USER, query, top_k=3, min_score=0.14)
                whole.append(since(t))
        store = await MemoryStore.create(folder, embedder)
        stored = await store.count(USER)

        def search(q: str, c: str | None = None) -> Awaitable[object]:
            return store.search(USER, q, top_k=3, min_score=0.14, extra_context=c)

        for q in queries[:20]:
            await store.search(USER, q, top_k=3, min_score=0.14)
        await store.memories(USER)  # the load the first of them started: warm from here on
        warm = [await timed(search(q, c)) for q, c in zip(queries, contexts, strict=True)]
        plain = [await timed(search(q)) for q in queries]
        # Each message new (nothing from the query-vector cache), as in a real conversation.
        new_messages = [
            await timed(search(f"{q} ({i})", c))
            for i, (q, c) in enumerate(zip(queries, contexts, strict=True))
        ]
        stages = await new_message_stages(store, embedder, queries, contexts, profile)
        as_before = 0  # searches whose hits equal those of sorting every memory's score
        for q, c in zip(queries, contexts, strict=True):
            got = await store.search(USER, q, top_k=3, min_score=0.14, extra_context=c)
            want = await full_sort_hits(store, q, c, 3, 0.14)
            as_before += [h.memory.id for h in got.hits] == want
        embed_ms = [await timed(embedder.embed([q], kind="query")) for q in queries]

        vectors = (await embedder.embed(queries, kind="query")).vectors
        col = store._col
        where = {"user_id": USER}
        include = ["distances", "documents", "metadatas"]
        chroma_ms = [
            sync_ms(
                col.query,
                query_embeddings=v[None, :],
                n_results=10,
                where=where,
                include=include,
            )
            for v in vectors
        ]

        used = {m.text for m in await store.memories(USER)}
        fresh_facts = [t for t in learner_facts(2 * n_memories + 400) if t not in used]
        new_facts = fresh_facts[:50]
        adds: list[Ms] = []
        after_write: list[Ms] = []
        upserts: list[Ms] = []
        outcomes: list[str] = []
        for i, t in enumerate(new_facts):
            t0 = start()
            outcomes.append((await store.add(USER, t, source="extracted")).action)
            adds.append(since(t0))
            after_write.append(await timed(search(queries[i % len(queries)])))
        dups = [await timed(store.add(USER, t, source="extracted")) for t in new_facts[:20]]
        # The extraction path: each new fact with its search terms and situations (indexed and
        # embedded with the text), after the text-only ones above (/remember's).
        worded: list[Ms] = []
        for t in fresh_facts[100:150]:
            terms, situations = words_for(rng)
            item = NewMemory(t, "extracted", terms=terms, situations=situations)
            worded.append(await timed(store.add_many(USER, [item])))
        if profile:
            await add_profile(store, fresh_facts[50:100])
        data = store._cache.get(USER)
        assert data is not None
        # What each write used to redo over all of the user's memories (the code before the
        # incremental snapshots): re-key every text, copy the matrix, rebuild the BM25 index.
        rebuild = [
            sync_ms(
                lambda: (
                    [normalise_text(t) for t in data.texts],
                    np.vstack([*data.matrix.chunks(), data.matrix.row(0)[None, :]]),
                    BM25.from_texts(data.texts),
                )
            )
            for _ in range(5)
        ]
        replaced, copied = supersede_snapshots(data)
        one = vectors[0][None, :]
        for k in range(20):  # Chroma's own cost of writing one record, outside memora
            upserts.append(
                sync_ms(
                    col.upsert,
                    ids=[f"raw-{k}"],
                    embeddings=one,
                    documents=["a raw record"],
                    metadatas=[{"user_id": 1000 + k, "seq": 1}],
                )
            )
        await store.close()

    print(f"\n{n_queries} queries, top_k=3, min_score=0.14, one user with {stored:,} memories")
    print("(the first search's CPU includes the background load running in the same process)")
    print("(× baseline: median over the median of a baseline measured in this same run)\n")
    report("search, warm, half with extra_context", warm, chroma_ms)
    used = sum(bool(c) and is_follow_up(q) for q, c in zip(queries, contexts, strict=True))
    print(f"  follow-ups among them (ranked with the context too): {used} of {len(queries)}")
    report("search, warm, message only", plain, chroma_ms)
    report("search, warm, new messages, half with context", new_messages, chroma_ms)
    print(f"  hits equal to sorting every memory's score: {as_before} of {len(queries)}")
    for name, ms, base in stages:
        if ms:
            report(name, ms, base)
        else:
            print(name)
    report("search right after an add", after_write, chroma_ms)
    report("  of which: embed one message (LocalUSE)", embed_ms)
    report("  baseline: Chroma filtered kNN query (top 10)", chroma_ms)
    report("open the store at a restart (process start)", opened)
    report("first search after a restart (new store object)", cold, whole)
    print("  each, in order (the first is the process's first search):", " ".join(
        f"{m:.0f}" for m in cold))  # fmt: skip
    report("  then: the rest of the load into the cache", filled)
    report("  then: the first warm search (same message)", first_warm)
    report("    before, it built the dense weights too: this more", weights)
    report("  baseline: load the whole user, then rank", whole)
    print(f"  first search's hits equal the warm search's (top 3): {same} of {restarts}")
    report("add() of a new fact (text only, as /remember)", adds, rebuild)
    kinds = {k: outcomes.count(k) for k in sorted(set(outcomes))}
    print(f"  what they did: {kinds}")
    superseded = [ms for ms, what in zip(adds, outcomes, strict=True) if what == "superseded"]
    if superseded:
        print(f"  the supersedes among them: median {statistics.median(superseded):.1f} ms,"
              f" slowest {max(superseded):.1f} ms")  # fmt: skip
    slow = sorted(range(len(adds)), key=lambda i: -adds[i])[:4]
    print("  the slowest, (order, what, ms):", ", ".join(
        f"({i + 1}, {outcomes[i]}, {adds[i]:.0f})" for i in sorted(slow)))  # fmt: skip
    report("add() of a duplicate", dups, rebuild)
    report("add() of a new fact with 6 terms + 6 situations", worded, rebuild)
    report("  baseline: Chroma upsert of one record", upserts)
    report("  before this change, per write: re-key + copy + BM25", rebuild)
    report("a supersede's new snapshot (UserData.replaced)", replaced, copied)
    report("  baseline: the whole matrix copied (the code before)", copied)
    print(f"\nend: {load()}")


def supersede_snapshots(data: UserData, n: int = 50) -> tuple[list[Ms], list[Ms]]:
    """The snapshot a supersede makes (a memory's new version: its row changed), against what
    it cost before the chunked matrix: a fresh buffer of twice the rows with every row copied
    into it (each snapshot may be held by a search, so a changed row cannot be written in
    place). Interleaved, each from the same snapshot."""
    rng = np.random.default_rng(1)
    rows = [int(i) for i in rng.integers(0, len(data.entries), n)]
    made: list[Ms] = []
    copied: list[Ms] = []
    for i in rows:
        old = data.entries[i]
        entry = Entry(old.memory, old.seq, data.matrix.row((i + 1) % len(data.entries)).copy())
        made.append(sync_ms(data.replaced, i, entry))
        copied.append(sync_ms(copy_whole, data, i, entry.vector))
    return made, copied


def copy_whole(data: UserData, i: int, vec: np.ndarray) -> np.ndarray:
    """The code before's supersede: the matrix copied into a new buffer of twice its rows."""
    rows, dim = data.matrix.shape
    array = np.empty((max(2 * rows, 16), dim), dtype=np.float32)
    at = 0
    for chunk in data.matrix.chunks():
        array[at : at + len(chunk)] = chunk
        at += len(chunk)
    array[i] = vec
    return array


async def add_profile(store: MemoryStore, facts: list[str]) -> None:
    """cProfile's tables of `add()` of new facts, the blocking calls run inline (cProfile sees
    one thread)."""
    import memora.longterm.embeddings as embeddings_module

    async def inline(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    saved = store_module.run_blocking, embeddings_module.run_blocking
    store_module.run_blocking = embeddings_module.run_blocking = inline
    profiler = cProfile.Profile()
    outcomes: list[str] = []
    try:
        profiler.enable()
        for text in facts:
            outcomes.append((await store.add(USER, text, source="extracted")).action)
        profiler.disable()
    finally:
        store_module.run_blocking, embeddings_module.run_blocking = saved
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    kinds = {k: outcomes.count(k) for k in sorted(set(outcomes))}
    print(f"\ncProfile: add() of {len(facts)} more new facts, inline ({kinds})")
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(15)
    print(out.getvalue())


PAIRS: list[tuple[str, str, str]] = [
    ("dup", "My level is B1", "我的英文程度是B1"),
    ("dup", "The user's English level is B1.", "My level is B1"),
    ("dup", "我的英文程度是B1", "The user's English level is B1"),
    ("dup", "使用者的英文程度是 B1。", "我的英文程度是B1"),
    ("dup", "The user's English level is B1.", "User's English level: B1"),
    ("dup", "用户住在台北。", "使用者住在台北。"),
    ("dup", "使用者住在台北。", "The user lives in Taipei."),
    ("dup", "使用者的多益目標是 850 分。", "The user's TOEIC goal is 850 points."),
    ("dup", "使用者想加強旅遊英文。", "The user wants to improve travel English."),
    ("update", "My level is B2", "My level is B1"),
    ("update", "使用者的英文程度是 B2。", "使用者的英文程度是 B1。"),
    ("update", "The user's TOEIC goal is 900 points.", "The user's TOEIC goal is 850 points."),
    ("distinct", "The user moved to Tainan.", "The user lives in Taipei."),
    ("distinct", "The user wants to improve business English.", "The user wants travel English."),
    ("distinct", "使用者想加強商務英文。", "使用者想加強旅遊英文。"),
    ("distinct", "The user does not like grammar drills.", "The user likes grammar drills."),
    ("distinct", "The user prefers American English.", "The user prefers British English."),
    ("distinct", "使用者的口說程度是 B1。", "The user's writing level is B1."),
    ("distinct", "使用者的多益考了 850 分。", "The user wants 850 on TOEIC."),
    ("distinct", "使用者的女兒 5 歲。", "使用者的兒子 5 歲。"),
    ("distinct", "使用者住在台中。", "使用者住在台北的中山區。"),
]

BILINGUAL = [
    ("The user's English level is B1.", "使用者的英文程度是 B1。"),
    ("The user wants to improve travel English.", "使用者想加強旅遊英文。"),
    ("The user prefers short grammar explanations.", "使用者偏好簡短的文法解釋。"),
    ("The user likes learning through example sentences.", "使用者喜歡透過例句學習。"),
    ("The user lives in Taipei.", "使用者住在台北。"),
    ("The user is a nurse.", "使用者是護理師。"),
    ("The user confuses the present perfect and the simple past.", "使用者常搞混完成式和過去式。"),
    ("The user has trouble pronouncing 'th'.", "使用者很難發出 th 的音。"),
    (
        "The user plans to take TOEIC in 2026-12 and wants 850.",
        "使用者打算 2026-12 考多益，目標 850。",
    ),
    ("The user can only study on weekends.", "使用者只有週末能讀書。"),
    ("The user wants to prepare for job interviews in English.", "使用者想準備英文面試。"),
    ("The user enjoys American TV series.", "使用者喜歡看美劇。"),
    ("The user is shy about speaking English.", "使用者不太敢開口說英文。"),
    ("The user wants to read English news.", "使用者想看懂英文新聞。"),
    ("The user has a daughter in elementary school.", "使用者有一個讀小學的女兒。"),
    ("The user studies 30 minutes every morning.", "使用者每天早上讀 30 分鐘。"),
    ("The user wants corrections in Chinese.", "使用者希望用中文解釋錯誤。"),
    ("The user works at a trading company.", "使用者在貿易公司上班。"),
    ("The user is preparing for IELTS.", "使用者正在準備雅思考試。"),
    ("The user forgets new vocabulary quickly.", "使用者背單字很快就忘記。"),
    ("The user wants to improve business English.", "使用者想加強商務英文。"),
    ("The user moved to Tainan.", "使用者搬到台南了。"),
    ("The user's English level is B2.", "使用者的英文程度是 B2。"),
    ("The user prefers British English.", "使用者偏好英式英文。"),
]


def pairs() -> None:
    embedder = LocalUSE()

    def enc(texts: list[str]) -> np.ndarray:
        return embedder._encode([embedding_text(t) for t in texts])  # as the store embeds them

    print("\nhand-made pairs (new | existing): expected → relation, cosine")
    for expected, new, old in PAIRS:
        v = enc([new, old])
        cos = float(v[0] @ v[1])
        got = relation(new, old, cos).value
        mark = "  " if got.startswith(expected[:4]) else "!!"
        print(f"{mark} {expected:>8} → {got:<9} {cos:.3f}  {new} | {old}")

    en = enc([e for e, _ in BILINGUAL])
    zh = enc([z for _, z in BILINGUAL])
    n = len(BILINGUAL)
    sims = en @ zh.T
    same = np.diag(sims)
    diff = sims[~np.eye(n, dtype=bool)]
    print(f"\n{n} facts in English and Chinese (USE cosine, final full stop dropped)")
    print(f"same fact, EN vs ZH:     min {same.min():.3f}  median {np.median(same):.3f}"
          f"  max {same.max():.3f}")  # fmt: skip
    print(f"different facts, EN/ZH:  max {diff.max():.3f}  p99 {np.quantile(diff, 0.99):.3f}"
          f"  median {np.median(diff):.3f}")  # fmt: skip
    texts = [e for e, _ in BILINGUAL] + [z for _, z in BILINGUAL]
    vecs = np.vstack([en, zh])
    verdicts: dict[tuple[bool, str], int] = {}
    wrong: list[tuple[str, str, float]] = []
    for i, j in itertools.permutations(range(2 * n), 2):
        same_fact = i % n == j % n
        cos = float(vecs[i] @ vecs[j])
        rel = relation(texts[i], texts[j], cos)
        verdicts[(same_fact, rel.value)] = verdicts.get((same_fact, rel.value), 0) + 1
        if not same_fact and rel is Relation.DUPLICATE:
            wrong.append((texts[i], texts[j], cos))
    for same_fact, label in ((True, "same fact, EN vs ZH"), (False, "different facts")):
        counts = {r: v for (s, r), v in sorted(verdicts.items()) if s == same_fact}
        total = sum(counts.values())
        print(f"relation() on {total} ordered pairs, {label}: " + ", ".join(
            f"{r} {v}" for r, v in counts.items()
        ))  # fmt: skip
    for a, b, cos in wrong:
        print(f"   different facts judged duplicate ({cos:.3f}): {a} | {b}")
    facts = learner_facts(1000)
    fv = embedder._encode([embedding_text(t) for t in facts])
    sims = fv @ fv.T
    dup_pairs = [
        (facts[i], facts[j], float(sims[i, j]))
        for i, j in zip(*np.nonzero(sims >= 0.5), strict=True)
        if i != j and relation(facts[i], facts[j], float(sims[i, j])) is Relation.DUPLICATE
    ]
    print(
        f"\nbenchmark memories (1,000 generated facts): {len(dup_pairs)} ordered pairs judged"
        " duplicate (reordered lists, 繁/简 spellings, a fact contained in another):"
    )
    for a, b, cos in dup_pairs[:8]:
        print(f"   {cos:.3f}  {a} | {b}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--restarts", type=int, default=10, help="first searches after a restart")
    parser.add_argument("--store", type=Path, help="keep the built store here (default: temp dir)")
    parser.add_argument("--pairs", action="store_true", help="also print the duplicate table")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print cProfile's tables of the searches with every message new and of"
        " add() of 50 new facts",
    )
    parser.add_argument(
        "--sync-threshold",
        type=int,
        help="run Chroma's writes at this HNSW sync_threshold instead of memora's (Chroma's"
        " default, 1000; 1: the previous layout, every write persisted), for a side-by-side figure",
    )
    args = parser.parse_args()
    if args.sync_threshold is not None:
        store_module.CHROMA_HNSW = {"sync_threshold": args.sync_threshold}
        print(f"Chroma writes at sync_threshold {args.sync_threshold} (not memora's)")
    asyncio.run(overhead(args.memories, args.queries, args.restarts, args.store, args.profile))
    if args.pairs:
        pairs()


if __name__ == "__main__":
    main()

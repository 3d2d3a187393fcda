"""The per-user snapshots and the BM25 index change by one memory per write, and end up exactly
as if they had been built from scratch (the ranking must not depend on how the index got there)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from memora.longterm.dedupe import Relation, normalise_text, relation, relation_floor
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.ranking import hybrid_rank, weights_for_query
from memora.longterm.snapshot import Entry, UserData
from tests.support.index import RELATION_TEXTS, TEXTS, entry

QUERIES = ["IELTS 雅思 準備", "level B1 english", "台北 銀行", "cooking piano airports", "zzz"]


def assert_same_index(got: BM25, want: BM25) -> None:
    assert got.n_docs == want.n_docs
    assert got.avgdl == want.avgdl
    assert np.array_equal(got.doc_len, want.doc_len)
    assert np.array_equal(got._len_norm, want._len_norm)
    assert got._postings.keys() == want._postings.keys()
    for term, (ids, tfs) in want._postings.items():
        g_ids, g_tfs = got._postings[term]
        assert np.array_equal(g_ids, ids) and g_ids.dtype == ids.dtype, term
        assert np.array_equal(g_tfs, tfs) and g_tfs.dtype == tfs.dtype, term
    for query in QUERIES:
        terms = tokenize(query)
        assert np.array_equal(got.coverage(terms), want.coverage(terms))
        assert np.array_equal(got.scores(terms), want.scores(terms))


def test_bm25_appended_replaced_removed_equal_a_fresh_build() -> None:
    rng = random.Random(11)
    docs: list[str] = []
    index = BM25([])
    for step in range(200):
        op = rng.random()
        if docs and op < 0.25:
            i = rng.randrange(len(docs))
            docs[i] = rng.choice(TEXTS)
            index = index.replaced(i, tokenize(docs[i]))
        elif docs and op < 0.35:
            i = rng.randrange(len(docs))
            del docs[i]
            index = index.removed(i)
        else:
            docs.append(rng.choice(TEXTS) + f" {step}")
            index = index.appended(tokenize(docs[-1]))
        assert_same_index(index, BM25.from_texts(docs))
    assert docs  # the walk ended with documents in the index


def test_bm25_derived_index_leaves_the_old_one_unchanged() -> None:
    old = BM25.from_texts(TEXTS[:4])
    before = {t: (ids.copy(), tfs.copy()) for t, (ids, tfs) in old._postings.items()}
    old.appended(tokenize(TEXTS[5]))
    old.replaced(0, tokenize(TEXTS[6]))
    old.removed(1)
    assert_same_index(old, BM25.from_texts(TEXTS[:4]))
    assert all(np.array_equal(old._postings[t][0], ids) for t, (ids, _) in before.items())




def fresh(data: UserData) -> UserData:
    return UserData(data.entries, np.array(data.vectors))


def assert_same_data(got: UserData, want: UserData) -> None:
    assert [(e.memory, e.seq) for e in got.entries] == [(e.memory, e.seq) for e in want.entries]
    assert len(got.entries) == len(want.entries)
    for g, w in zip(got.entries, want.entries, strict=True):
        assert np.array_equal(g.vector, w.vector)
    assert np.array_equal(got.vectors, want.vectors)
    assert got.texts == want.texts
    assert got.keys == want.keys
    assert got._shared_keys == want._shared_keys  # what carries the keys through a write
    assert np.array_equal(got.weight_kinds, want.weight_kinds)  # (n, 2): per message script
    assert_same_index(got.bm25, want.bm25)


def test_user_data_carries_texts_keys_and_index_through_writes() -> None:
    rng = random.Random(5)
    data = UserData((), np.zeros((0, 8), dtype=np.float32))
    data.bm25, data.keys, data.texts, data.weight_kinds  # noqa: B018 - the writes carry them
    snapshots: list[tuple[UserData, UserData]] = []
    for k in range(120):
        op = rng.random()
        if data.entries and op < 0.3:
            i = rng.randrange(len(data.entries))
            old = data.entries[i]
            new = entry(1000 + k, rng.choice(TEXTS))
            memory = dataclasses.replace(old.memory, text=new.memory.text, terms=new.memory.terms)
            data = data.replaced(i, Entry(memory, old.seq, new.vector))
            assert "keys" in data.__dict__  # carried, not rebuilt by the next write
        elif data.entries and op < 0.4:
            data = data.without(rng.choice(data.entries).memory.id)
            data.bm25, data.keys, data.texts, data.weight_kinds  # noqa: B018
        else:
            data = data.appended(entry(k, rng.choice(TEXTS)))
        assert {"bm25", "keys", "texts", "weight_kinds"} <= data.__dict__.keys()
        assert_same_data(data, fresh(data))
        snapshots.append((data, fresh(data)))
    for snapshot, copy in snapshots:  # later writes never changed an earlier snapshot
        assert_same_data(snapshot, copy)
    assert data.keys == {
        k: i for i, k in reversed(list(enumerate(normalise_text(t) for t in data.texts)))
    }
    assert data._shared_keys  # the walk met texts held by several memories at once


def test_appending_to_an_older_snapshot_does_not_touch_a_newer_one() -> None:
    base = UserData((), np.zeros((0, 8), dtype=np.float32)).appended(entry(1, TEXTS[0]))
    a = base.appended(entry(2, TEXTS[1]))
    b = base.appended(entry(3, TEXTS[2]))  # row 1 of the shared buffer is a's: b copies
    assert np.array_equal(a.vectors[1], entry(2, TEXTS[1]).vector)
    assert np.array_equal(b.vectors[1], entry(3, TEXTS[2]).vector)
    assert [e.memory.id for e in a.entries] == ["m1", "m2"]
    assert [e.memory.id for e in b.entries] == ["m1", "m3"]


CHATS = (-100, -200, None)  # two groups and a private chat (no origin recorded)


def in_chat(k: int, text: str, chat: int | None) -> Entry:
    e = entry(k, text)
    return Entry(dataclasses.replace(e.memory, chat_id=chat), e.seq, e.vector)


def rank(data: UserData, query: str) -> list[tuple[int, float]]:
    """The store's one ranking (MemoryStore._rank) over a snapshot, as (memory seq, score)."""
    qvec = np.random.default_rng(len(query)).standard_normal(8).astype(np.float32)
    hits = hybrid_rank(
        qvec / np.linalg.norm(qvec),
        data.vectors,
        query,
        data.texts,
        5,
        0.0,
        dense_weight=weights_for_query(data.weight_kinds, query),
        index=data.bm25,
    )
    return [(data.entries[h.index].seq, h.score) for h in hits]


def test_a_groups_view_is_made_once_and_carried_through_writes_as_a_fresh_build() -> None:
    """A group's search ranks the member's memories from that group: the view (and its lexical
    index) is kept with the snapshot and updated by each write, never rebuilt per search, and
    ranks exactly as a view built from scratch."""
    rng = random.Random(8)
    data = UserData((), np.zeros((0, 8), dtype=np.float32))
    for k in range(150):
        views = {c: data.from_chat(c) for c in CHATS if c is not None}
        for view in views.values():
            view.bm25, view.texts, view.weight_kinds  # noqa: B018 - what a search derives
        op = rng.random()
        touched: set[int | None] = set()
        moved = False  # a memory updated from another chat moves there: both views are remade
        if data.entries and op < 0.3:
            i = rng.randrange(len(data.entries))
            old = data.entries[i]
            new = in_chat(1000 + k, rng.choice(TEXTS), rng.choice(CHATS))
            memory = dataclasses.replace(
                old.memory, text=new.memory.text, terms=new.memory.terms, chat_id=new.memory.chat_id
            )
            data = data.replaced(i, Entry(memory, old.seq, new.vector))
            touched = {old.memory.chat_id, memory.chat_id}
            moved = len(touched) == 2
        elif data.entries and op < 0.4:
            gone = rng.choice(data.entries)
            data = data.without(gone.memory.id)
            touched = {gone.memory.chat_id}
        else:
            added = in_chat(k, rng.choice(TEXTS), rng.choice(CHATS))
            data = data.appended(added)
            touched = {added.memory.chat_id}
        for chat, before in views.items():
            carried = data.__dict__["_chat_views"].get(chat)
            if chat not in touched:
                assert carried is before  # a write elsewhere leaves a group's view as it was
            elif not moved:
                assert carried is not None and "bm25" in carried.__dict__, "carried, not rebuilt"
            view = data.from_chat(chat)
            assert carried in (None, view) and data.from_chat(chat) is view  # once per snapshot
            keep = [i for i, e in enumerate(data.entries) if e.memory.chat_id == chat]
            want = UserData(tuple(data.entries[i] for i in keep), data.vectors[keep])
            assert view.entries == want.entries
            assert np.array_equal(view.vectors, want.vectors)
            assert_same_index(view.bm25, want.bm25)
            for query in QUERIES:
                assert rank(view, query) == rank(want, query)
    assert all(data.from_chat(c).entries for c in CHATS if c is not None)




def test_a_new_memory_is_compared_only_where_relation_can_say_more_than_distinct() -> None:
    """`relation_floor` lets the store skip memories below it: no verdict is lost."""
    cosines = np.linspace(0.0, 1.0, 101)
    checked = said_more = 0
    for new in RELATION_TEXTS:
        floor = relation_floor(new)
        for old in RELATION_TEXTS:
            if normalise_text(new) == normalise_text(old):
                continue
            for cosine in cosines[cosines < floor]:
                assert relation(new, old, float(cosine)) is Relation.DISTINCT, (new, old, cosine)
                checked += 1
            above = {relation(new, old, float(c)) for c in cosines[cosines >= floor]}
            said_more += bool(above - {Relation.DISTINCT})
    assert checked > 10_000
    assert said_more >= 4  # duplicates and updates exist among these pairs above the floor


def test_a_loaded_snapshot_has_room_so_its_first_appends_copy_no_matrix() -> None:
    """What the load makes (UserData.with_room): the appends that follow write one row each
    into the same buffer, end up as a fresh build, and leave the loaded snapshot as it was."""
    loaded = [entry(k, TEXTS[k % len(TEXTS)]) for k in range(6)]
    matrix = np.stack([e.vector for e in loaded])
    data = UserData.with_room(tuple(loaded), matrix.copy())
    data.bm25, data.keys, data.texts, data.weight_kinds  # noqa: B018 - what the load builds
    first = data
    for k in range(6, 12):
        data = data.appended(entry(k, TEXTS[k % len(TEXTS)]))
        assert np.shares_memory(data.vectors, first.vectors)  # no copy of the matrix
        # the entries' vectors are the matrix's rows: the user's vectors are held once
        assert all(np.shares_memory(e.vector, first.vectors) for e in first.entries)
        assert_same_data(data, fresh(data))
    assert np.array_equal(first.vectors, matrix)
    assert_same_data(first, UserData(tuple(loaded), matrix))

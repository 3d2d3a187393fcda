"""The chunked matrix the cache keeps a user's vectors in (memora.longterm.matrix): every write
gives exactly the rows a plain array would hold, never changes a matrix made before it, copies
one chunk at most, and its products are the same float32 as one product over the whole array."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memora.longterm.lexical import BM25
from memora.longterm.matrix import CHUNK, Matrix
from memora.longterm.ranking import hybrid_scores
from memora.longterm.search import one_blas_thread


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def assert_rows(matrix: Matrix, want: np.ndarray) -> None:
    assert len(matrix) == len(want) and matrix.shape == want.shape
    assert np.array_equal(matrix.array(), want)
    chunks = matrix.chunks()
    assert all(len(c) == CHUNK for c in chunks[:-1])  # a row's chunk is by its index alone
    assert all(c.dtype == np.float32 for c in chunks)


def test_writes_give_the_rows_of_a_plain_array_and_leave_older_matrices_as_they_were() -> None:
    rng = np.random.default_rng(3)
    walk = random.Random(3)
    dim = 8
    start = unit_rows(rng, CHUNK - 5, dim)  # the walk crosses chunk boundaries both ways
    matrix, want = Matrix.with_room(start, 40), start.copy()
    kept: list[tuple[Matrix, np.ndarray]] = []
    ops = {"appended": 0, "replaced": 0, "removed": 0}
    for step in range(1500):
        op = walk.random()
        if op < 0.5:
            row = unit_rows(rng, 1, dim)[0]
            matrix, want = matrix.appended(row), np.vstack([want, row])
            ops["appended"] += 1
        elif op < 0.9:
            i = walk.randrange(len(want))
            row = unit_rows(rng, 1, dim)[0]
            matrix, want = matrix.replaced(i, row), want.copy()
            want[i] = row
            ops["replaced"] += 1
        else:
            i = walk.randrange(len(want))
            matrix, want = matrix.removed(i), np.delete(want, i, axis=0)
            ops["removed"] += 1
        if step % 7 == 0:
            assert_rows(matrix, want)
            kept.append((matrix, want))
        if step % 97 == 0:  # an older matrix written again (a write that raced): its own rows
            old, old_want = kept[walk.randrange(len(kept))]
            row = unit_rows(rng, 1, dim)[0]
            assert_rows(old.appended(row), np.vstack([old_want, row]))
    assert_rows(matrix, want)
    assert len(want) > CHUNK + 100 and min(ops.values()) > 100
    for old, old_want in kept:  # later writes never changed an earlier matrix
        assert_rows(old, old_want)


def test_a_changed_row_copies_its_chunk_only_and_an_append_no_chunk() -> None:
    rng = np.random.default_rng(4)
    rows = unit_rows(rng, 3 * CHUNK + 10, 16)
    matrix = Matrix.with_room(rows, len(rows) // 8)
    changed = matrix.replaced(CHUNK + 3, rows[0])
    same = [a is b for a, b in zip(matrix.chunks(), changed.chunks(), strict=True)]
    assert same == [True, False, True, True]
    assert np.array_equal(changed.row(CHUNK + 3), rows[0])
    assert np.array_equal(matrix.row(CHUNK + 3), rows[CHUNK + 3])  # the old one unchanged
    grown = changed.appended(rows[1])
    assert all(a is b for a, b in zip(changed.chunks()[:-1], grown.chunks()[:-1], strict=False))
    assert np.shares_memory(grown.chunks()[-1], changed.chunks()[-1])  # written behind it
    last = matrix.replaced(len(rows) - 1, rows[2]).appended(rows[3])  # room kept behind
    assert np.array_equal(last.row(len(rows)), rows[3])


def test_a_full_last_chunk_starts_a_new_one_and_an_empty_matrix_grows() -> None:
    rng = np.random.default_rng(5)
    rows = unit_rows(rng, CHUNK, 4)
    full = Matrix.with_room(rows, 100)
    grown = full.appended(rows[0])
    assert [len(c) for c in grown.chunks()] == [CHUNK, 1]
    assert grown.chunks()[0] is full.chunks()[0]
    empty = Matrix.of(np.zeros((0, 4), dtype=np.float32))
    assert len(empty) == 0 and empty.array().shape == (0, 4) and empty.dot(rows[0]).shape == (0,)
    one = empty.appended(rows[5])
    assert_rows(one, rows[5:6])
    assert_rows(one.removed(0), rows[:0])


@pytest.mark.parametrize(
    "n", [1, 2, 37, CHUNK, CHUNK + 1, CHUNK + 2, 2 * CHUNK + 1, 3 * CHUNK - 3, 10_000]
)
def test_products_are_the_whole_arrays_to_the_bit(n: int) -> None:
    """The store's cosines are one BLAS call per chunk: each row's is the same float32 as in
    one product over the whole array (chunks start at multiples of CHUNK, a multiple of the
    kernels' row blocks), so a ranking or a duplicate's verdict does not depend on the cut."""
    rng = np.random.default_rng(n)
    rows = unit_rows(rng, n, 512)
    matrix = Matrix.of(rows)
    written = Matrix.with_room(rows[: n // 2], 8)
    for row in rows[n // 2 :]:
        written = written.appended(row)
    with one_blas_thread():
        for _ in range(20):
            vec = unit_rows(rng, 1, 512)[0]
            whole = rows @ vec
            assert np.array_equal(matrix.dot(vec), whole)
            assert np.array_equal(written.dot(vec), whole)
    for ids in (rng.choice(n, size=min(n, 50), replace=False), np.arange(0, n, 7), []):
        for m in (matrix, written):  # in any order, and sorted (a chunk at a time)
            assert np.array_equal(m.take(ids), rows[np.asarray(ids, dtype=np.intp)])


def test_bad_indices_and_dimensions_are_refused() -> None:
    rows = np.eye(4, dtype=np.float32)
    matrix = Matrix.of(rows)
    for bad in (-1, 4):
        with pytest.raises(IndexError):
            matrix.row(bad)
        with pytest.raises(IndexError):
            matrix.replaced(bad, rows[0])
        with pytest.raises(IndexError):
            matrix.removed(bad)
        with pytest.raises(IndexError):
            matrix.take([0, bad])
    with pytest.raises(ValueError, match="dimension"):
        matrix.dot(np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError):
        matrix.appended(np.ones(5, dtype=np.float32))
    with pytest.raises(ValueError, match=r"\(n, dim\)"):
        Matrix.of(np.ones(4, dtype=np.float32))


def test_the_hybrid_scores_of_a_chunked_matrix_are_those_of_its_array() -> None:
    """What the store ranks (MemoryStore._scores passes the snapshot's Matrix) scores exactly
    as the same rows in one array, the form the benchmarks and the tests rank."""
    rng = np.random.default_rng(6)
    n = 2 * CHUNK + 1
    rows = unit_rows(rng, n, 64)
    texts = [f"the user likes topic {i % 97} and word{i % 13}" for i in range(n)]
    index = BM25.from_texts(texts)
    matrix = Matrix.with_room(rows, 8)
    with one_blas_thread():
        for query in ("likes topic 5", "word3", "nothing here"):
            vec = unit_rows(rng, 1, 64)[0]
            got = hybrid_scores(vec, matrix, query, texts, index=index)
            want = hybrid_scores(vec, rows, query, texts, index=index)
            assert np.array_equal(got.dense, want.dense)
            assert np.array_equal(got.lexical, want.lexical)
            assert np.array_equal(got.score, want.score)
        with pytest.raises(ValueError, match="dimension"):
            hybrid_scores(np.ones(8), matrix, "x", texts, index=index)

"""A user's memory vectors as an immutable matrix kept in chunks of rows that snapshots share.

The cache's snapshots (memora.longterm.snapshot) never change once made: a search may hold one
across an await while a write makes the next. A write must not copy the whole matrix (20 MB at
10,000 memories of 512 dimensions) to change or add one row (decision 0102).

Here the rows live in chunks of :data:`CHUNK` rows and a matrix is the tuple of its chunks:

- changing a row copies its one chunk (2 MB at most), and every other chunk is shared;
- an appended row is written past the end of the last chunk's buffer, when no snapshot has a
  row there yet (:class:`_Buffer`), else that chunk alone is copied;
- removing a row shifts the rows behind it, so its chunk and the ones after it are made
  again (a deletion is rare, and it copied the whole matrix before).

A chunk's rows are by their index alone (chunk k holds rows k·CHUNK to (k+1)·CHUNK), so a
matrix has the same chunks however it was reached, by writes or by a fresh build.
The matrix-vector product is one BLAS call per chunk. CHUNK is a multiple of the row blocks
BLAS kernels work in, and a row's product in an aligned block of rows is then the same
float32 as in one product over the whole matrix (test_matrix checks it against this numpy's
BLAS; a last chunk of one row needs care, see :meth:`Matrix.dot`): the ranking does not
depend on how the matrix is cut.

Written here because no library we could find keeps persistent (copy-on-write) numpy matrices
that a BLAS product can still run over: pyrsistent and immutables hold Python objects.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["CHUNK", "Matrix"]

CHUNK = 1024  # rows per chunk: 2 MB at 512 dimensions of float32
MIN_ROOM = 16  # the fewest rows a buffer for appends is made with

Rows = npt.NDArray[np.float32]


class _Buffer:
    """A chunk's storage with spare rows behind it. The rows past ``used`` belong to no
    matrix yet, so the matrix that ends at ``used`` can grow into them without a copy; another
    matrix that ends there as well (an older snapshot appended to twice) must copy."""

    __slots__ = ("array", "used")

    def __init__(self, rows: Rows, capacity: int) -> None:
        n, dim = rows.shape
        size = min(CHUNK, max(capacity, n + 1, MIN_ROOM))
        self.array: Rows = np.empty((size, dim), dtype=np.float32)
        self.array[:n] = rows
        self.used = n

    def grown(self, n: int, row: Rows) -> Rows | None:
        """The first n rows plus `row`, if row n is still free here; None if it is not."""
        if self.used != n or n >= self.array.shape[0]:
            return None
        self.array[n] = row
        self.used = n + 1
        return self.array[: n + 1]


class Matrix:
    """An (n, dim) float32 matrix that never changes once made; :meth:`appended`,
    :meth:`replaced` and :meth:`removed` make the next one, sharing every chunk they can."""

    __slots__ = ("_buffer", "_chunks", "dim")

    def __init__(self, chunks: Sequence[Rows], dim: int, buffer: _Buffer | None = None) -> None:
        # every chunk but the last has CHUNK rows; the last may be a prefix of `buffer`
        self._chunks = tuple(chunks)
        self.dim = dim
        self._buffer = buffer

    @classmethod
    def of(cls, rows: npt.ArrayLike) -> Matrix:
        """A matrix over these rows (n, dim): chunks are views of them, so the caller must not
        change them afterwards."""
        array = np.asarray(rows, dtype=np.float32)
        if array.ndim != 2:
            raise ValueError(f"rows must be (n, dim), not {array.shape}")
        n, dim = array.shape
        return cls([array[a : a + CHUNK] for a in range(0, n, CHUNK)], dim)

    @classmethod
    def with_room(cls, rows: Rows, room: int) -> Matrix:
        """A copy of the rows, each chunk its own array (a chunk replaced later frees its old
        one), with up to `room` spare rows behind the last chunk for appends."""
        n, dim = rows.shape
        chunks = [np.array(rows[a : a + CHUNK]) for a in range(0, n, CHUNK)]
        if not chunks or len(chunks[-1]) == CHUNK:
            return cls(chunks, dim)
        buffer = _Buffer(chunks[-1], len(chunks[-1]) + room)
        return cls([*chunks[:-1], buffer.array[: buffer.used]], dim, buffer)

    def __len__(self) -> int:
        return (len(self._chunks) - 1) * CHUNK + len(self._chunks[-1]) if self._chunks else 0

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.dim

    def row(self, i: int) -> Rows:
        """Row i, a view (read only by convention: the matrix never changes)."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        row: Rows = self._chunks[i // CHUNK][i % CHUNK]
        return row

    def array(self) -> Rows:
        """The rows as one contiguous array: a copy unless there is a single chunk (for tests
        and benchmarks; the store's paths use :meth:`dot` and :meth:`take`)."""
        if not self._chunks:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(self._chunks) == 1:
            return self._chunks[0]
        return np.concatenate(self._chunks)

    def dot(self, vec: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Every row's product with a vector (dim,): one BLAS call per chunk."""
        v = np.ascontiguousarray(vec, dtype=np.float32).reshape(-1)
        if v.shape[0] != self.dim:
            raise ValueError(f"dimension mismatch: vector {v.shape[0]}, rows {self.dim}")
        if not self._chunks:
            return np.zeros(0, dtype=np.float32)
        if len(self._chunks) == 1:
            out: npt.NDArray[np.float32] = self._chunks[0] @ v
            return out
        parts = [chunk @ v for chunk in self._chunks]
        if len(self._chunks[-1]) == 1:
            # numpy makes a one-row product a dot product, which sums in another order than
            # the BLAS kernel that a longer matrix's last row gets: the row with the four
            # before it, as it is in the whole matrix (rows go through the kernel in fours)
            tail = np.concatenate([self._chunks[-2][-4:], self._chunks[-1]])
            parts[-1] = (tail @ v)[-1:]
        return np.concatenate(parts)

    def take(self, ids: npt.ArrayLike) -> Rows:
        """The rows at these indices (0 to n-1), in that order (a new array)."""
        index = np.asarray(ids, dtype=np.intp).reshape(-1)
        if len(index) and (index.min() < 0 or index.max() >= len(self)):
            raise IndexError("row index out of range")
        if len(self._chunks) == 1:
            taken: Rows = self._chunks[0][index]
            return taken
        which = index // CHUNK
        out = np.empty((len(index), self.dim), dtype=np.float32)
        if bool((which[:-1] <= which[1:]).all()):  # in chunk order (sorted ids are)
            cuts = np.searchsorted(which, np.arange(len(self._chunks) + 1))
            for k, chunk in enumerate(self._chunks):
                a, b = int(cuts[k]), int(cuts[k + 1])
                if a < b:
                    np.take(chunk, index[a:b] - k * CHUNK, axis=0, out=out[a:b], mode="clip")
            return out
        for k in np.unique(which):
            sel = which == k
            out[sel] = self._chunks[k][index[sel] - k * CHUNK]
        return out

    def appended(self, row: npt.ArrayLike) -> Matrix:
        """This matrix with one more row at the end."""
        vec = np.asarray(row, dtype=np.float32).reshape(1, self.dim)
        if not self._chunks or len(self._chunks[-1]) == CHUNK:  # a new chunk
            new = _Buffer(vec, 1)
            return Matrix([*self._chunks, new.array[:1]], self.dim, new)
        last = self._chunks[-1]
        if (
            self._buffer is not None
            and (grown := self._buffer.grown(len(last), vec[0])) is not None
        ):
            return Matrix([*self._chunks[:-1], grown], self.dim, self._buffer)
        # no room, or another matrix has that row already: copy the last chunk
        new = _Buffer(np.concatenate([last, vec]), 2 * len(last))
        return Matrix([*self._chunks[:-1], new.array[: new.used]], self.dim, new)

    def replaced(self, i: int, row: npt.ArrayLike) -> Matrix:
        """This matrix with row i changed: a copy of row i's chunk, the others shared."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = i // CHUNK
        chunks = list(self._chunks)
        buffer = self._buffer
        if k == len(chunks) - 1 and len(chunks[k]) < CHUNK:  # the last chunk: keep room behind
            buffer = _Buffer(chunks[k], 2 * len(chunks[k]))
            chunks[k] = buffer.array[: buffer.used]
        else:
            chunks[k] = np.array(chunks[k])
        chunks[k][i % CHUNK] = np.asarray(row, dtype=np.float32).reshape(self.dim)
        return Matrix(chunks, self.dim, buffer)

    def removed(self, i: int) -> Matrix:
        """This matrix without row i: the chunks before it shared, the rest made again."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = i // CHUNK
        rest = np.concatenate(self._chunks[k:])
        rest = np.delete(rest, i - k * CHUNK, axis=0)
        tail = [rest[a : a + CHUNK] for a in range(0, len(rest), CHUNK)]
        return Matrix([*self._chunks[:k], *tail], self.dim)

    def chunks(self) -> tuple[Rows, ...]:
        """The chunks (views; tests check what two matrices share)."""
        return self._chunks

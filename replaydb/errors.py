"""Error types shared by every layer.

This module belongs to the ground floor of the ``replaydb`` package, which every layer may import
(with :mod:`replaydb.timeunits`, :mod:`replaydb.spark` and :mod:`replaydb.batches`; the rule is
tested by ``tests/test_layering.py``): it depends on nothing else of the project. Every error a
user can cause derives from :class:`ReplayDBError`; the CLI prints such errors as one line plus a
hint and exits non-zero, and shows a traceback only with ``--debug``.
"""

from __future__ import annotations


class ReplayDBError(Exception):
    """Base class of all errors replaydb raises on purpose.

    ``hint`` is an optional second line telling the user what to do about it.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ReplayDBError):
    """Wrong arguments to an API call or CLI command."""

    exit_code = 2


class StoreError(ReplayDBError):
    """The store or a stream cannot be opened, read or written as asked."""


class StreamNotFound(StoreError):
    """A stream named in a call does not exist in the store."""


class CorruptionError(StoreError):
    """Stored data violates an invariant (found by ``replaydb check`` or while reading)."""


class ReadOnlyError(StoreError):
    """A write was attempted on a store opened read-only."""


class ConcurrentWriterError(StoreError):
    """Another process holds the writer lock of a stream."""


class DataError(ReplayDBError):
    """Input data is invalid; names the row and column where possible.

    ``row`` is the 0-based position of the offending row in the batch (or source file row number
    when ``source`` is set), ``column`` the column name.
    """

    def __init__(
        self,
        message: str,
        *,
        row: int | None = None,
        column: str | None = None,
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = []
        if source is not None:
            where.append(f"source {source}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        full = f"{', '.join(where)}: {message}" if where else message
        super().__init__(full, hint=hint)
        self.row = row
        self.column = column
        self.source = source
        self.reason = message


class LateEventError(DataError):
    """An event is older than the stream's lateness bound allows."""


class SchemaError(DataError):
    """A batch's columns or types do not fit the stream's schema."""


class QueryError(ReplayDBError):
    """A query cannot be parsed, analysed or planned."""


class ParseError(QueryError):
    """A query text does not parse; carries the position and what was expected.

    ``pos`` is the 0-based character offset; ``line`` and ``col`` are 1-based.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str,
        pos: int,
        expected: list[str] | None = None,
        hint: str | None = None,
    ) -> None:
        pos = max(0, min(pos, len(text)))
        line = text.count("\n", 0, pos) + 1
        line_start = text.rfind("\n", 0, pos) + 1
        col = pos - line_start + 1
        line_end = text.find("\n", pos)
        line_text = text[line_start : line_end if line_end >= 0 else len(text)]
        exp = ""
        if expected:
            uniq = sorted(dict.fromkeys(expected))
            exp = f"; expected {' or '.join(uniq[:8])}{' ...' if len(uniq) > 8 else ''}"
        full = f"line {line}, column {col}: {message}{exp}"
        super().__init__(full, hint=hint)
        self.text = text
        self.pos = pos
        self.line = line
        self.col = col
        self.expected = expected or []
        self.reason = message
        self.snippet = f"{line_text}\n{' ' * (col - 1)}^"


class OperatorError(ReplayDBError):
    """An operator cannot process its input as configured."""


class StateCapExceeded(OperatorError):
    """An operator's state grew past its configured cap.

    Raised instead of exhausting memory; ``cap_name`` is the option that sets the cap.
    """

    def __init__(self, operator: str, what: str, size: int, cap: int, cap_name: str) -> None:
        super().__init__(
            f"{operator}: {what} reached {size:,}, over the state cap {cap_name}={cap:,}",
            hint=f"raise {cap_name} (or narrow the query: smaller window, fewer Kleene symbols)",
        )
        self.operator = operator
        self.what = what
        self.size = size
        self.cap = cap
        self.cap_name = cap_name


class ResourceLimitExceeded(ReplayDBError):
    """A query exceeded its memory budget or time limit."""

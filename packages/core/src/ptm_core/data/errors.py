"""The error every data-spec reader raises: file, line, field, what is wrong, how to fix."""

from __future__ import annotations


class DataError(ValueError):
    """A data file does not follow its spec (``data_specs/``).

    The message reads ``"<file>:<line>: <problem> (field '<field>'); <fix>"``, with the
    ``:<line>`` left out for problems of a whole file or path. Each kind of data has its
    own subclass (``CorpusError``, ``KGError``, ...) so callers can catch one kind.

    Args:
        path: the file (or directory, or list of paths) at fault.
        line: 1-based line number, or ``None``.
        field: what is wrong on that line (a column, a JSON key, ``encoding``, ...).
        problem: what is wrong.
        fix: how to fix it.
    """

    def __init__(self, path: object, line: int | None, field: str, problem: str, fix: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.problem = problem
        self.fix = fix
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {problem} (field '{field}'); {fix}")

    def __reduce__(self) -> tuple[type[DataError], tuple[str, int | None, str, str, str]]:
        # Rebuilt from its parts, not from the message: the error crosses process
        # boundaries (``ptm prepare`` workers, Prefect process pools, Dask).
        return type(self), (self.path, self.line, self.field, self.problem, self.fix)

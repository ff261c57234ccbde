"""The screening package's one exception tree."""

from __future__ import annotations

__all__ = ["ListFormatError", "ScreeningError"]


class ScreeningError(Exception):
    """Base of every error the screening package raises."""


class ListFormatError(ScreeningError):
    """A list file that cannot be read as the format it was given as: the message names the file's
    format, the element or line, and what is wrong, and nothing of it is loaded."""

    def __init__(self, fmt: str, where: str, problem: str) -> None:
        super().__init__(f"{fmt}: {where}: {problem}")
        self.fmt, self.where, self.problem = fmt, where, problem

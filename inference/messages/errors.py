"""Errors of the message layer: each names the message, the field and the reason."""

from __future__ import annotations

__all__ = ["MessageError"]


class MessageError(Exception):
    """A payment message was refused. ``field`` is e.g. ``:32A:`` or ``GrpHdr/MsgId``."""

    def __init__(self, reason: str, *, field: str | None = None, message: str | None = None) -> None:
        self.reason, self.field, self.message = reason, field, message
        where = " ".join(p for p in (message, field) if p)
        sep = " " if where.endswith(":") else ": "
        super().__init__(f"{where}{sep}{reason}" if where else reason)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.reason, self.field, self.message))

    def located(self, message: str) -> MessageError:
        """The same error, naming the message (e.g. 'message 3 (MT103 REF123)')."""
        return MessageError(self.reason, field=self.field, message=message)


def _rebuild(reason: str, field: str | None, message: str | None) -> MessageError:
    return MessageError(reason, field=field, message=message)

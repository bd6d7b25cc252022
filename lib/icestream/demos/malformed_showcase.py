"""A malformed payload shown to a reader (notebook 01): whole, with a mark where the ingest finds it broken.

The payloads themselves are :func:`icestream.synthetic.malformed.malformed_payload`; the verdict is
the ingest's own parser (:func:`icestream.ingest.parse.parse_event`), so what the notebook shows is
what the ingest does.
"""

from __future__ import annotations

import re

from icestream.ingest.parse import Rejection, parse_event
from icestream.limits import DEFAULT_MAX_EVENT_BYTES

BREAK_MARK = "⟦✗⟧"  # where a malformed payload breaks, in the text shown to a reader
_ELIDE_RUN = 60  # a run of one repeated character longer than this is shown shortened


def show_malformed(data: bytes, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> tuple[str, str]:
    """A malformed payload whole, as text, with :data:`BREAK_MARK` where the ingest finds it broken.

    Bytes that are not UTF-8 show as ``\\xNN``; a long run of one character (an ``oversized``
    payload's padding) is shortened to its first characters and a count, and nothing else is left out.

    Args:
        data: The payload as it goes on the wire.
        max_event_bytes: The ingest's size limit.

    Returns:
        ``(verdict, text)``: the ingest's reason and detail for it (``reason: detail``, or
        ``accepted``), and the payload with the mark at the point of failure, if it has one.
    """
    verdict = parse_event(data, max_event_bytes)
    if not isinstance(verdict, Rejection):
        return "accepted", _text(data)
    where = _break_offset(data, verdict.detail)
    text = _text(data) if where is None else _text(data[:where]) + BREAK_MARK + _text(data[where:])
    return f"{verdict.reason}: {verdict.detail}", text


def _break_offset(data: bytes, detail: str) -> int | None:
    """The byte offset the parser's detail points at: a character, a byte, or the field it names."""
    if match := re.search(r"\(char (\d+)\)", detail):
        characters = int(match.group(1))
        return len(data.decode("utf-8", errors="replace")[:characters].encode("utf-8"))
    if match := re.search(r"at byte (\d+)", detail):
        return int(match.group(1))
    if match := re.match(r"(\w+)[: ]", detail):
        found = data.find(f'"{match.group(1)}":'.encode())
        return found if found >= 0 else None
    return None


def _text(data: bytes) -> str:
    text = data.decode("utf-8", errors="backslashreplace")
    return re.sub(
        r"(.)\1{" + str(_ELIDE_RUN) + ",}",
        lambda run: f"{run.group(1) * 10}…({len(run.group(0)) - 10:,} more {run.group(1)!r})",
        text,
    )

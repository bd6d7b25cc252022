"""The producer's progress: a live tqdm bar in a terminal, one summary line anywhere else.

tqdm redraws its bar with carriage returns. A terminal overwrites the line; a notebook executed by
papermill (or a log file) keeps every redraw, so one send became dozens of lines of output. Where
the stream is not a terminal, this prints nothing while sending and one line at the end.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from tqdm import tqdm


class SummaryLine:
    """A progress object with tqdm's ``update``/``close`` that prints one line when closed.

    Args:
        total: Records expected (None if unknown).
        desc: What is being sent (``→ user-events``).
        file: Where the line goes.
    """

    def __init__(self, total: int | None, desc: str, file: IO[str]) -> None:
        self.total, self.desc, self.file = total, desc, file
        self.n = 0
        self._started = time.monotonic()
        self._closed = False

    def update(self, count: int = 1) -> None:
        """Count ``count`` more records."""
        self.n += count

    def close(self) -> None:
        """Print the one line (once)."""
        if self._closed:
            return
        self._closed = True
        seconds = time.monotonic() - self._started
        of_total = f"/{self.total:,}" if self.total is not None else ""
        rate = f", {self.n / seconds:,.0f} rec/s" if seconds > 0 else ""
        print(f"{self.desc}: {self.n:,}{of_total} rec in {seconds:.1f} s{rate}", file=self.file, flush=True)


def progress_bar(total: int | None, desc: str, enabled: bool = True, file: IO[str] | None = None) -> Any:
    """A tqdm bar on a terminal, a :class:`SummaryLine` elsewhere, or a silent bar when not ``enabled``.

    Args:
        total: Records expected (None if unknown).
        desc: The bar's label.
        enabled: False: no output at all.
        file: The output stream (default: standard error, read when called).
    """
    stream = file if file is not None else sys.stderr
    if not enabled:
        return tqdm(total=total, disable=True)
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        return tqdm(total=total, unit="rec", mininterval=0.5, desc=desc, file=stream)
    return SummaryLine(total, desc, stream)

"""The live dashboard of an ingest (notebook 02): one image, redrawn in place while the ingest runs.

:func:`live_dashboard` looks at the tables every ``every`` seconds (:func:`icestream.queries.live.live_frame`),
draws the frame, and replaces the image in one display output (``display(..., display_id=True)``, then
``update``), so the notebook shows one chart building up, not a stream of them. It ends by itself:
after ``seconds``, or as soon as the ingest query it watches has stopped, with a last look so the
final commit shows. In a kernel that ``icestream run`` started (``make run``, a scheduled run) nobody
watches: the dashboard waits for the ingest without looking at the tables, then draws the last frame
once, so the looks cost the ingest nothing. Under papermill the saved output is the last frame either way.

Figures are made with ``matplotlib.figure.Figure``, not ``pyplot``: pyplot keeps every figure it
makes until it is closed, and the inline backend would show each one again at the end of the cell.
"""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from icestream.queries.live import INTERVAL_SECONDS, LOOKBACK, LiveFrame, live_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icestream.config import Settings
    from icestream.ingest.query import IngestQuery

# Distinct colours for the event types, in the order of their names (the same type keeps its colour
# from one frame to the next while the set of types stays the same).
TYPE_COLOURS = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:gray",
    "tab:olive",
    "tab:cyan",
)
DPI = 80  # about 1000 x 360 pixels: small enough to send every second or two


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _freshness(frame: LiveFrame) -> str:
    """The latest batch's freshness as a range, newest record to oldest (docs/glossary.md)."""
    span = frame.freshness_s
    return "-" if span is None else f"{span[0]:.1f}-{span[1]:.1f} s"


def live_figure(frame: LiveFrame) -> Figure:
    """Draw one frame: arrivals since the start per 10 s by type (stacked bars), and each batch's freshness.

    The rows of a backlog the window read (arrived before it began) are one line of text, not a bar
    that would flatten the live ones.

    The title carries the counts: events, batches, rejects, the lag at the look and the latest batch's
    freshness (newest record to oldest), both as docs/glossary.md defines them.

    Args:
        frame: A look at the tables (:func:`icestream.queries.live.live_frame`).

    Returns:
        The figure (not registered with pyplot: nothing to close).
    """
    import matplotlib.dates as mdates

    fig = Figure(figsize=(12.5, 4.5), layout="constrained")
    rate_ax, wait_ax = fig.subplots(1, 2, width_ratios=[3, 2])
    fig.suptitle(
        f"Live ingest since {frame.since:%H:%M:%S} UTC, at {frame.now:%H:%M:%S} UTC: "
        f"{frame.events:,} events, {len(frame.batches)} batches, {frame.rejected:,} rejects, "
        f"lag {_seconds(frame.lag_s)}, latest batch's freshness {_freshness(frame)}"
    )

    live = frame.arrivals[~frame.arrivals["before_window"]]
    wide = live.pivot_table(index="interval", columns="event_type", values="events", aggfunc="sum", fill_value=0)
    if wide.empty:
        message = (
            "no events committed in this window yet" if frame.arrivals.empty else "no arrivals since the start yet"
        )
        rate_ax.text(0.5, 0.5, message, ha="center", va="center", transform=rate_ax.transAxes)
    else:
        starts = [stamp.tz_convert(None).to_pydatetime() for stamp in wide.index]
        bottom = [0] * len(starts)
        for index, event_type in enumerate(sorted(wide.columns)):
            counts = wide[event_type].tolist()
            rate_ax.bar(
                starts,
                counts,
                width=timedelta(seconds=INTERVAL_SECONDS * 0.85),
                bottom=bottom,
                align="edge",
                label=event_type,
                color=TYPE_COLOURS[index % len(TYPE_COLOURS)],
            )
            bottom = [low + count for low, count in zip(bottom, counts, strict=True)]
        rate_ax.legend(ncol=3, fontsize=8, loc="upper left")
        rate_ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=8))
        rate_ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    title = f"Arrivals since the start, per {INTERVAL_SECONDS} s, by type"
    if frame.backlog_events:
        title += f"\nand {frame.backlog_events:,} backlog events written (arrived before {frame.since:%H:%M:%S})"
    rate_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    rate_ax.set(xlabel="Kinesis arrival (UTC)", ylabel=f"events per {INTERVAL_SECONDS} s", title=title)

    timed = frame.batches.dropna(subset=["oldest_wait_s", "newest_wait_s"])
    if timed.empty:
        message = "no batch committed yet" if frame.batches.empty else "no arrival times in the snapshot summaries"
        wait_ax.text(0.5, 0.5, message, ha="center", va="center", transform=wait_ax.transAxes)
    else:
        wait_ax.plot(
            timed["batch_id"], timed["oldest_wait_s"], marker="o", color="tab:red", label="the batch's oldest record"
        )
        wait_ax.plot(
            timed["batch_id"], timed["newest_wait_s"], marker="s", color="tab:green", label="the batch's newest record"
        )
        wait_ax.legend(fontsize=8, loc="upper right")
        wait_ax.grid(alpha=0.3)
    wait_ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # batch ids are whole numbers
    wait_ax.set(xlabel="batch", ylabel="seconds from Kinesis arrival to commit", title="Freshness per batch")
    return fig


class LiveView:
    """One frame as a display object: the chart as a PNG, and a line of text where images do not show.

    Args:
        frame: The frame to show.
    """

    def __init__(self, frame: LiveFrame) -> None:
        self.frame = frame
        buffer = io.BytesIO()
        live_figure(frame).savefig(buffer, format="png", dpi=DPI)
        self.png = buffer.getvalue()

    def text(self) -> str:
        """The frame in one line (what a terminal or a text-only front end shows)."""
        frame = self.frame
        return (
            f"{frame.now:%H:%M:%S} UTC: {frame.events} events, {len(frame.batches)} batches, "
            f"{frame.rejected} rejects, lag {_seconds(frame.lag_s)}, latest batch's freshness {_freshness(frame)}"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"image/png": base64.b64encode(self.png).decode("ascii"), "text/plain": self.text()}

    def __repr__(self) -> str:
        return self.text()


def live_dashboard(
    spark: SparkSession,
    settings: Settings,
    *,
    seconds: float,
    every: float = 2.0,
    since: datetime | None = None,
    query: IngestQuery | None = None,
    show_sql: bool = True,
    clock: Callable[[], datetime] = _utc_now,
    sleep: Callable[[float], None] = time.sleep,
    display: Callable[..., Any] | None = None,
    headless: bool | None = None,
) -> LiveFrame:
    """Show the live dashboard in one display output, redrawn every ``every`` seconds, then return the last frame.

    It ends by itself: after ``seconds``, or once ``query`` has stopped (for whatever reason; its
    ``await_termination`` reports an error), always with one last look so the final commit shows.
    Give no ``query`` to watch an ingest running in another process.

    Args:
        spark: The session.
        settings: Names the tables.
        seconds: Longest time to watch.
        every: Seconds from one look to the next (a look that takes longer is followed at once).
        since: Start of the window (default: ``LOOKBACK`` before the first look); give the run's start
            so a re-run does not count the runs before it.
        query: The ingest to watch in this process (an :class:`~icestream.ingest.query.IngestQuery`).
        show_sql: Print the statements a look runs, once, under the chart.
        clock: The current time, aware UTC (tests pass a fake one).
        sleep: Waits between looks (tests pass a fake one).
        display: IPython's ``display`` (tests pass a fake one); it must return a handle with ``update``.
        headless: Draw the last frame only (default: in a kernel ``icestream run`` started,
            :func:`icestream.workbook.runner.headless`).

    Returns:
        The last frame.
    """
    if display is None:
        from IPython.display import display as ipython_display

        display = ipython_display
    if headless is None:
        from icestream.workbook.runner import headless as run_headless

        headless = run_headless()
    start = clock()
    since = start - LOOKBACK if since is None else since
    deadline = start + timedelta(seconds=seconds)
    handle, looks = None, 0
    while True:
        began = clock()
        last = (query is not None and not query.is_active) or began >= deadline
        if headless and not last:  # nobody watches: wait for the end without looking
            sleep(min(max(every, 0.5), (deadline - began).total_seconds()))
            continue
        frame = live_frame(spark, settings, since, began)
        view = LiveView(frame)
        if handle is None:  # the first look; outside IPython display() returns no handle and prints each look
            handle = display(view, display_id=True)
        else:
            handle.update(view)
        looks += 1
        if show_sql and looks == 1:
            print(*frame.statements, sep="\n\n")
        if last:
            return frame
        wait = (min(began + timedelta(seconds=every), deadline) - clock()).total_seconds()
        if wait > 0:
            sleep(wait)

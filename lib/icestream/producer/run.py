"""One production run (notebook 01, the ``icestream produce`` command, the background producer) and
its summary.

A run sends records, generated or read from a file; writes the ground truth of the anomalies it
injected (:func:`icestream.synthetic.ground_truth.ground_truth_path`); and writes one typed summary,
:class:`RunSummary`, to ``<run_dir>/produce_<mode>_summary.json``, one file per mode (``backfill``,
``live``, ``file``). The backfill's summary is what the anomaly detector scores
(:func:`icestream.demos.scoring_scope`: the run's id, event-time range and ground truth), whichever
of notebook 01 or ``icestream produce --backfill-hours`` sent it; the live one is what the background
producer reports.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError
from icestream.producer.aggregate import Aggregator
from icestream.producer.summary import ProduceSummary
from icestream.producer.target import KAFKA, KINESIS, check_target, destination, open_sender
from icestream.synthetic.generator import EventGenerator
from icestream.synthetic.ground_truth import Anomaly, ground_truth_path, write_ground_truth
from icestream.synthetic.second_kind import tables_truth_path, write_tables_truth
from icestream.synthetic.wire import Record

MODES = ("backfill", "live", "file")
RUN_SUMMARY_FILE = "produce_{mode}_summary.json"
# Written once a producer handles SIGTERM (finish the batch, write the summary): a stop sent before it
# would end the process with no summary, so a stop waits for it (icestream.producer.background).
READY_FILE = "producer-{pid}.ready"


def ready_path(settings: Settings, pid: int) -> Path:
    """The file producer ``pid`` writes once a SIGTERM makes it finish its batch and write its summary."""
    return settings.path("run_dir") / READY_FILE.format(pid=pid)


@dataclass(frozen=True)
class RunSummary:
    """What one production run generated and sent.

    Attributes:
        mode: ``backfill``, ``live`` or ``file``.
        stream: The stream it sent to (with ``target`` ``kafka``: the topic).
        finished_at: When it ended (epoch seconds).
        producer: What the producer did (sent, retried, failed, unsendable ...).
        run_id: The id every generated event carries in ``properties["run_id"]`` (None for a file).
        seed: The generator's seed (None for a file).
        window_start: First event time generated (aware UTC; None for a file).
        window_end: Generated event times are before this (None for a file); for a live run with a
            record count, where the records ran out.
        ground_truth: The ground-truth file of the anomalies (None for a file).
        anomalies: The anomalies injected.
        generator: What the generator yielded (:meth:`EventGenerator.summary`; None for a file).
        target: ``kinesis`` or ``kafka`` (:mod:`icestream.producer.target`).
    """

    mode: str
    stream: str
    finished_at: float
    producer: ProduceSummary
    run_id: str | None = None
    seed: int | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    ground_truth: Path | None = None
    anomalies: tuple[Anomaly, ...] = ()
    generator: dict[str, Any] | None = None
    target: str = KINESIS

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready values (times as ISO-8601 strings)."""
        return {
            "mode": self.mode,
            "stream": self.stream,
            "target": self.target,
            "finished_at": self.finished_at,
            "run_id": self.run_id,
            "seed": self.seed,
            "window_start": self.window_start.isoformat() if self.window_start else None,
            "window_end": self.window_end.isoformat() if self.window_end else None,
            "ground_truth": str(self.ground_truth) if self.ground_truth else None,
            "anomalies": [asdict(anomaly) for anomaly in self.anomalies],
            "generator": self.generator,
            "producer": self.producer.as_dict(),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunSummary:
        """Read back what :meth:`as_dict` wrote."""
        start, end, truth = values.get("window_start"), values.get("window_end"), values.get("ground_truth")
        return cls(
            mode=values["mode"],
            stream=values["stream"],
            finished_at=values["finished_at"],
            producer=ProduceSummary.from_dict(values["producer"]),
            run_id=values.get("run_id"),
            seed=values.get("seed"),
            window_start=datetime.fromisoformat(start) if start else None,
            window_end=datetime.fromisoformat(end) if end else None,
            ground_truth=Path(truth) if truth else None,
            anomalies=tuple(Anomaly(**anomaly) for anomaly in values.get("anomalies", [])),
            generator=values.get("generator"),
            target=values.get("target", KINESIS),  # written before Kafka was a target
        )


def run_summary_path(settings: Settings, mode: str) -> Path:
    """Where a run of ``mode`` writes its summary: ``<run_dir>/produce_<mode>_summary.json``.

    Raises:
        ConfigError: If ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ConfigError(f"production mode {mode!r}: choose one of {', '.join(MODES)}.")
    return settings.path("run_dir") / RUN_SUMMARY_FILE.format(mode=mode)


def write_run_summary(summary: RunSummary, path: Path) -> Path:
    """Write ``summary`` as JSON to ``path`` (folders created); return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary.as_dict(), indent=2))
    return path


def read_run_summary(path: Path) -> RunSummary | None:
    """Read a summary written by :func:`write_run_summary`; None when the file is missing or unreadable."""
    try:
        return RunSummary.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_production(
    settings: Settings,
    records: Iterable[Record],
    *,
    mode: str,
    generator: EventGenerator | None = None,
    append_truth: bool = False,
    summary_file: Path | None = None,
    stop_on_sigterm: bool = False,
    client: Any | None = None,
    aggregator: Aggregator | None = None,
    to: str = KINESIS,
    **options: Any,
) -> RunSummary:
    """Send records, write the anomaly ground truth (and the truth per table) and the run's summary; return it.

    Args:
        settings: Names the stream, endpoint and run folder.
        records: What to send (usually ``generator`` itself, or the records it yielded).
        mode: ``backfill``, ``live`` or ``file``: names the summary file (:func:`run_summary_path`).
        generator: The generator behind ``records``, for its window, ground truth and counts.
        append_truth: Add to the ground-truth file instead of replacing it (live after a backfill).
        summary_file: Also write the summary here (JSON).
        stop_on_sigterm: Finish the current batch and write the summary on SIGTERM (main thread only).
        client: A Kinesis client, or with ``to="kafka"`` a confluent-kafka Producer (default: one made
            from the settings).
        aggregator: Packs records into KPL aggregates and/or compresses them before sending
            (:class:`~icestream.producer.aggregate.Aggregator`); the summary then counts Kinesis
            records, the aggregator its user records. Kafka takes compression only.
        to: ``kinesis`` (``settings.stream_name``) or ``kafka`` (``settings.kafka_topic``): the same
            records, run id, ground truth and summary either way.
        **options: Passed to :meth:`~icestream.producer.send_loop.SendLoop.send`.

    Returns:
        The summary, as written to :func:`run_summary_path`.

    Raises:
        ConfigError: If ``mode`` or ``to`` is unknown, ``aggregator`` aggregates for Kafka, or (Kafka) no
            broker is configured or the topic is missing.
        ServiceUnavailableError: If the stream's or topic's service does not answer.
    """
    summary_path = run_summary_path(settings, mode)
    if check_target(to) == KAFKA and aggregator is not None and aggregator.per_aggregate > 1:
        raise ConfigError(
            "KPL aggregation packs records for Kinesis; Kafka batches records itself: no aggregator with to='kafka'."
        )
    sender = open_sender(settings, to, client)  # first: no broker configured is refused before any file is written
    truth_path = ground_truth_path(settings)
    if generator is not None and (generator.ground_truth or not append_truth):
        write_ground_truth(generator.ground_truth, truth_path, append=append_truth)
    ready = ready_path(settings, os.getpid()) if stop_on_sigterm else None
    if ready is not None:
        signal.signal(signal.SIGTERM, lambda *_: sender.stop())
        ready.parent.mkdir(parents=True, exist_ok=True)
        ready.touch()
    try:
        sent = sender.send(aggregator.records(records) if aggregator is not None else records, **options)
    finally:
        if ready is not None:
            ready.unlink(missing_ok=True)
    generated: dict[str, Any] = {}
    if generator is not None:
        config = generator.config
        generated = {
            "run_id": generator.run_id,
            "seed": config.seed,
            "window_start": config.start,
            "window_end": generator.window_end,
            "ground_truth": truth_path,
            "anomalies": tuple(generator.ground_truth),
            "generator": generator.summary(),
        }
    if generator is not None and generator.tables is not None:  # a second record kind or a new field was on
        write_tables_truth(generator.tables.truths(), tables_truth_path(settings), append=append_truth)
    summary = RunSummary(
        mode=mode, stream=destination(settings, to), finished_at=time.time(), producer=sent, target=to, **generated
    )
    write_run_summary(summary, summary_path)
    if summary_file is not None:
        write_run_summary(summary, summary_file)
    return summary

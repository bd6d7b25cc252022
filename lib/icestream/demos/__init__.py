"""What only the workbook's lessons need: the synthetic events and their ground truth, producing them,
and the scenarios, each making something happen and checking it against what it knows is true.

The events come from :mod:`icestream.synthetic` (the seeded generator, its ground truth, the
malformed kinds) and are sent by :mod:`icestream.producer` (runs, their summaries, live production
in the background); this face offers what the notebooks use of both.

A scenario drives a stream, an ingest or a table of its own for one lesson and compares the result
with its ground truth; none of it is part of a scheduled job, which imports nothing from here
(``tests/unit/test_layers.py`` checks it), so a slim install for jobs can leave it out.

- :mod:`~icestream.demos.layout_demo`: a tiny table to walk file by file (notebook 00).
- :mod:`~icestream.demos.hot_shard`: a shard's write limit shown on a stream of its own (notebook 01).
- :mod:`~icestream.demos.malformed_showcase`: a malformed payload with the ingest's verdict and the
  point where it breaks (notebook 01).
- :mod:`~icestream.demos.crash`: the ingest as its own process, SIGKILLed inside a batch and
  restarted: nothing lost, nothing twice (notebook 02).
- :mod:`~icestream.demos.reference_job`: the table and checkpoint of the reference job's lesson, anew
  each run (notebook 02).
- :mod:`~icestream.demos.kafka_lesson`: a topic and tables of the Kafka lesson's own, and the events it
  sends (notebook 11).
- :mod:`~icestream.demos.run_scope`: which production runs a table holds, and which are this run's
  (notebook 03).
- :mod:`~icestream.demos.routed_demo`: two record kinds and a new field, routed and evolved (notebook 05).
- :mod:`~icestream.demos.change_demo`: change data kept as a keyed table (notebook 06).
- :mod:`~icestream.demos.metrics_demo`: real_time_metrics kept by the ingest (notebook 07).
- :mod:`~icestream.demos.anomaly_evaluation`: the run to score, and the detector's flags against its
  ground truth (notebook 08).
"""

from __future__ import annotations

from icestream.face import Face

_FACE = Face(
    __name__,
    {
        "EVENT_TYPES": "icestream.synthetic.model",
        "EventGenerator": "icestream.synthetic.generator",
        "FLAG_DESCRIPTIONS": "icestream.synthetic.kinds",
        "MALFORMED_DESCRIPTIONS": "icestream.synthetic.malformed",
        "MALFORMED_KINDS": "icestream.synthetic.malformed",
        "ORDER_COLUMNS": "icestream.synthetic.entities",
        "ORDER_KEY": "icestream.synthetic.entities",
        "ORDER_ORDER": "icestream.synthetic.entities",
        "PROPERTY_FIELDS": "icestream.synthetic.model",
        "RUN_ID_PROPERTY": "icestream.synthetic.generator",
        "backfill_config": "icestream.synthetic.generator",
        "background_producer_status": "icestream.producer.background",
        "change_stream_demo": "icestream.demos.change_demo",
        "crash_demo": "icestream.demos.crash",
        "kafka_demo": "icestream.demos.kafka_lesson",
        "kafka_lesson_table": "icestream.demos.kafka_lesson",
        "copy_hour_for_sorting": "icestream.demos.health_demo",
        "create_layout_demo": "icestream.demos.layout_demo",
        "decode_events": "icestream.synthetic.wire",
        "evaluate": "icestream.demos.anomaly_evaluation",
        "expected_type_shares": "icestream.synthetic.model",
        "hot_shard_demo": "icestream.demos.hot_shard",
        "label_windows": "icestream.demos.anomaly_evaluation",
        "metrics_stream_demo": "icestream.demos.metrics_demo",
        "parse_anomalies": "icestream.synthetic.ground_truth",
        "plant_orphan_file": "icestream.demos.health_demo",
        "processes_in_group": "icestream.demos.crash",
        "read_ground_truth": "icestream.synthetic.ground_truth",
        "read_run_summary": "icestream.producer.run",
        "reference_job_lesson": "icestream.demos.reference_job",
        "routed_stream_demo": "icestream.demos.routed_demo",
        "run_production": "icestream.producer.run",
        "run_summary_path": "icestream.producer.run",
        "scoring_scope": "icestream.demos.anomaly_evaluation",
        "show_malformed": "icestream.demos.malformed_showcase",
        "start_background_producer": "icestream.producer.background",
        "start_live_window": "icestream.producer.background",
        "this_run": "icestream.demos.run_scope",
        "wait_for_pause": "icestream.demos.crash",
    },
)
__all__ = _FACE.names
__getattr__ = _FACE.get
__dir__ = _FACE.dir

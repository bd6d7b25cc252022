"""Keys the ingest writes into the summary of each snapshot it commits.

They live with the table layer because more than the ingest reads them: the ingest finds its
Kinesis positions again from them (:mod:`icestream.ingest.positions`), the dedupe index recognises
its own commits by the query id, and snapshot expiry keeps the newest snapshot that carries the
positions, or a metrics table's mark (:meth:`icestream.lake.maintenance.Maintenance.retain_for_positions`).
"""

from __future__ import annotations

POSITIONS_KEY = "icestream.positions"  # per-shard Kinesis positions, compact JSON
STREAM_KEY = "icestream.kinesis"  # the stream those positions belong to
BATCH_KEY = "icestream.batch-id"  # the ingest's batch number
QUERY_KEY = "icestream.query-id"  # the ingest query (one run of the ingest) that committed
CREATED_KEY = "icestream.kinesis-created"  # which incarnation of the stream the positions belong to
# The Kinesis arrival (ApproximateArrivalTimestamp, epoch milliseconds) of the batch's oldest and
# newest record: with the snapshot's commit time they give the batch's arrival -> commit lag.
FIRST_ARRIVAL_KEY = "icestream.first-arrival-ms"
LAST_ARRIVAL_KEY = "icestream.last-arrival-ms"
# A metrics table's refresh (icestream.lake.continuous_aggregate): the events snapshot it folded in, and that table.
METRICS_SOURCE_KEY = "icestream.metrics.source-snapshot"
METRICS_TABLE_KEY = "icestream.metrics.source-table"

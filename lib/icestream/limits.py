"""Kinesis Data Streams' service limits and the project's defaults derived from them.

One place for the numbers the producer, the generator, the reader and the settings share, so a
limit is never written twice with two values. Sources: the Kinesis Data Streams quotas page
(PutRecords, GetRecords, record size, iterator lifetime).
"""

from __future__ import annotations

# Writes (PutRecords).
MAX_RECORDS_PER_PUT = 500  # records in one PutRecords call
MAX_BYTES_PER_PUT = 5 * 1024 * 1024  # data + partition keys in one PutRecords call
MAX_RECORD_BYTES = 1024 * 1024  # one record's data + partition key
MAX_RECORDS_PER_SHARD_SECOND = 1000  # records written to one shard per second
MAX_BYTES_PER_SHARD_SECOND = 1024 * 1024  # data + partition keys written to one shard per second
THROTTLED = "ProvisionedThroughputExceededException"  # a put or get beyond a shard's limits
MAX_PARTITION_KEY_CHARS = 256  # a partition key is 1 to 256 Unicode characters
# Shards of a stream: the settings' cap, an account's default shard quota in the largest regions.
MAX_SHARD_COUNT = 500

# Reads (GetRecords).
MAX_RECORDS_PER_GET = 10_000  # records one GetRecords call returns at most
# The ingest's default bound on a batch per shard: ten GetRecords answers. At the stream's tip a
# batch holds what arrived since the last one whatever the bound; it decides only how a backlog is
# cut, and each batch has a fixed cost (about 1.4 core-seconds here), so fewer, larger ones drain
# it cheaper (see ingest.source.ShardSource).
DEFAULT_RECORDS_PER_SHARD = 10 * MAX_RECORDS_PER_GET
# The ingest's default bound on a batch over all its shards: what a batch keeps is bounded by this, not
# by the backlog. A kept record costs about 580 bytes of Spark's storage memory for the generator's
# 360-byte events (docs/ingest.md), so 250,000 is about 145 MB of a default 1 GiB driver's ~430 MB
# (what does not fit spills to disk); a backlog of 200,000 such records still drains in one batch.
DEFAULT_RECORDS_PER_BATCH = 250_000
GET_CALLS_PER_SECOND = 5  # per shard and per API
ITERATOR_LIFETIME_SECONDS = 300.0  # a shard iterator expires after 5 minutes

# The project's defaults.
DEFAULT_MAX_EVENT_BYTES = 64 * 1024  # the largest event the ingest accepts; `oversized` is above it
START_POSITIONS = ("trim_horizon", "latest", "at_timestamp")  # where a shard with no position starts
DEFAULT_START_POSITION = "trim_horizon"
SCHEMA_EVOLUTION_MODES = ("off", "add-columns", "add-and-widen")  # new payload fields: see ingest.evolve

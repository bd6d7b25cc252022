"""Sending records to Kinesis.

- :mod:`~icestream.producer.put`: the PutRecords loop (batches within the limits, per-record retries,
  pacing, a summary of what was sent and what was not).
- :mod:`~icestream.producer.run`: one production run and its typed summary in the run folder.
- :mod:`~icestream.producer.background`: live production in its own process (start, status, stop).
"""

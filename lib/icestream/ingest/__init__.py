"""The streaming ingest: Kinesis → Spark → Iceberg, exactly once (see ``query`` for the design).

``start_ingest`` and ``load_committed`` are offered by the ``icestream`` face; the command line, the
job entry points and the tests import from the modules.
"""

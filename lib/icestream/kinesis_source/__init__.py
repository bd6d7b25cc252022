"""Spark reads Kinesis itself: ``spark.readStream.format("kinesis")``, a Python data source for Spark 4.

- :mod:`~icestream.kinesis_source.options`: the options, their spellings, one clear error;
- :mod:`~icestream.kinesis_source.fetch`: a shard's GetRecords loop, to a cap or to a known end;
- :mod:`~icestream.kinesis_source.rows`: records as the source's rows (KPL aggregates, gzip/zlib expanded);
- :mod:`~icestream.kinesis_source.stream_reader`: Spark's offsets, partitions and reads;
- :mod:`~icestream.kinesis_source.data_source`: the ``kinesis`` data source and its registration;
- :mod:`~icestream.kinesis_source.session`: ``get_spark`` with the source registered;
- :mod:`~icestream.kinesis_source.crash_drill`: the crash campaign's kill points.

Only ``options``, ``fetch`` and ``rows`` import without Spark 4; the rest need ``pyspark.sql.datasource``.
"""

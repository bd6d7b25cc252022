"""Files into tables: ``icestream load`` reads JSON-lines files through the ingest's parser and commits
each file exactly once (see :mod:`icestream.file_load.files`); :mod:`icestream.file_load.bulk` loads payloads
straight into a table for tests and benchmarks."""

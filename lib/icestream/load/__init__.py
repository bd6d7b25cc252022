"""Files into tables: ``icestream load`` reads JSON-lines files through the ingest's parser and commits
each file exactly once (see :mod:`icestream.load.files`)."""

from icestream.load.files import LoadResult, load_files

__all__ = ["LoadResult", "load_files"]

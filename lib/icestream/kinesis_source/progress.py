"""Each shard's lag as a query's progress reports it: the ``millisBehindLatest`` in a batch's end offset.

A Python source has no metrics of its own on Spark 4.1 (a progress's ``sources[0].metrics`` stays
empty), so the source writes each shard's lag into the end offset it returns, and Spark reports
that offset everywhere progress goes: ``query.lastProgress``, ``query.recentProgress``, and each
``StreamingQueryListener.onQueryProgress`` event. PySpark hands the offset over in two forms: a
listener gets the JSON Spark wrote, ``lastProgress`` a Python ``repr`` of it; both are read here.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from icestream.kinesis_source.stream_reader import LAG_KEY


def end_offset(progress: Any) -> dict[str, Any]:
    """The kinesis source's end offset in a progress (``lastProgress``'s dict or a listener's object); {} if none."""
    sources = progress["sources"] if isinstance(progress, dict) else progress.sources
    for source in sources:
        text = source["endOffset"] if isinstance(source, dict) else source.endOffset
        if isinstance(text, dict):
            offset = text
        else:
            try:
                offset = json.loads(text)
            except (TypeError, ValueError):
                try:
                    offset = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    continue
        if isinstance(offset, dict) and "shards" in offset:
            return offset
    return {}


def shard_lag(progress: Any) -> dict[str, int]:
    """Milliseconds behind each shard's tip at the batch's end (MillisBehindLatest), by shard id."""
    return {shard: int(millis) for shard, millis in end_offset(progress).get(LAG_KEY, {}).items()}

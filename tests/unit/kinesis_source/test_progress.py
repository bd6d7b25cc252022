"""Each shard's lag read from a progress, in the two forms PySpark hands it over."""

from __future__ import annotations

import json
import types

from icestream.kinesis_source.progress import end_offset, shard_lag

OFFSET = {
    "stream": "events",
    "created": "1796228832.509",
    "shards": {"shardId-000000000000": "AFTER:10", "shardId-000000000001": "AFTER:12"},
    "millisBehindLatest": {"shardId-000000000000": 1500, "shardId-000000000001": 0},
}
LAG = {"shardId-000000000000": 1500, "shardId-000000000001": 0}


def test_last_progress_gives_the_offset_as_a_python_repr() -> None:
    progress = {"sources": [{"description": "kinesis", "endOffset": repr(OFFSET)}]}
    assert shard_lag(progress) == LAG
    assert end_offset(progress)["shards"] == OFFSET["shards"]


def test_a_listener_gets_the_json_spark_wrote() -> None:
    source = types.SimpleNamespace(endOffset=json.dumps(OFFSET))
    assert shard_lag(types.SimpleNamespace(sources=[source])) == LAG


def test_another_source_beside_it_is_passed_over() -> None:
    progress = {
        "sources": [{"endOffset": '{"topic": {"0": 5}}'}, {"endOffset": "not an offset"}, {"endOffset": OFFSET}]
    }
    assert shard_lag(progress) == LAG


def test_an_offset_without_lag_or_no_kinesis_source_gives_none() -> None:
    assert shard_lag({"sources": [{"endOffset": json.dumps({**OFFSET, "millisBehindLatest": {}})}]}) == {}
    assert shard_lag({"sources": [{"endOffset": None}]}) == {}

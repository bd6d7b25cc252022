"""Notebook 01's hot-shard demo stays on emulators: with the aws profile it sends nothing and creates no stream."""

from __future__ import annotations

import pytest

from icestream.config import load_settings
from icestream.demos import hot_shard


def test_the_demo_touches_no_real_account(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_: object, **__: object) -> None:
        raise AssertionError("the demo reached Kinesis with the aws profile")

    monkeypatch.setattr(hot_shard, "ensure_stream", forbidden)
    monkeypatch.setattr(hot_shard, "produce", forbidden)
    monkeypatch.setattr(hot_shard, "kinesis_client", forbidden)
    aws = load_settings(profile="aws", warehouse="s3://lake-bucket/icestream", stream_name="ev")
    assert hot_shard.hot_shard_demo(aws) is None

"""The Kinesis primer's facts, checked against the emulator: key → MD5 → shard, hash ranges, iterator types."""

from __future__ import annotations

from icestream.kinesis.clients import (
    ensure_stream,
    hash_key,
    kinesis_client,
    list_shards,
    peek_records,
    retention_hours,
    shard_for_key,
    shard_table,
)


def test_a_partition_key_lands_in_the_shard_its_md5_names(stream_settings) -> None:
    ensure_stream(stream_settings, shard_count=4)
    client = kinesis_client(stream_settings)
    shards = list_shards(client, stream_settings.stream_name)
    table = shard_table(shards)
    assert len(table) == 4
    assert table["open"].all()
    assert abs(table["hash_key_share"].sum() - 1.0) < 1e-9
    assert table["starting_hash_key"].iloc[0] == "0"
    assert int(table["ending_hash_key"].iloc[-1]) == 2**128 - 1
    assert hash_key("a") == 0x0CC175B9C0F1B6A831C399E269772661  # MD5("a"), as a 128-bit number
    for number in range(40):
        key = f"u{number:05d}"
        put = client.put_record(StreamName=stream_settings.stream_name, Data=b"{}", PartitionKey=key)
        assert put["ShardId"] == shard_for_key(shards, key), key


def test_iterator_types_start_where_their_names_say(stream_settings) -> None:
    ensure_stream(stream_settings, shard_count=1)
    client = kinesis_client(stream_settings)
    name = stream_settings.stream_name
    shard = list_shards(client, name)[0]["ShardId"]
    for number in range(3):
        client.put_record(StreamName=name, Data=f'{{"n": {number}}}'.encode(), PartitionKey="k")
    oldest = peek_records(client, name, shard, "TRIM_HORIZON", limit=10)
    assert len(oldest) == 3
    sequence = [record["sequence_number"] for record in oldest]
    assert sequence == sorted(sequence, key=int), "sequence numbers grow within a shard"
    after = peek_records(client, name, shard, "AFTER_SEQUENCE_NUMBER", limit=10, sequence_number=sequence[0])
    assert [record["sequence_number"] for record in after] == sequence[1:]
    at = peek_records(client, name, shard, "AT_SEQUENCE_NUMBER", limit=10, sequence_number=sequence[1])
    assert [record["sequence_number"] for record in at] == sequence[1:]
    assert peek_records(client, name, shard, "LATEST", limit=10) == [], "LATEST: only records put after it"
    assert peek_records(client, name, shard, "AT_TIMESTAMP", limit=10, timestamp=oldest[-1]["arrival"]) != []
    assert retention_hours(client, name) == 24

"""Kinesis: clients and shard listings, KPL aggregation, payload compression, and the local emulator."""

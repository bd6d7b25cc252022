"""Reading a batch from Kinesis: the plan of which shards to read, the Spark job and its task function,
the per-shard GetRecords loop, shards read side by side in threads, and the read on the driver at the tip."""

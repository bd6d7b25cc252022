"""What every process of icestream runs on: the Spark session and the jars, catalog, AWS sessions,
cluster shipping and child processes it needs. Nothing here knows Kinesis or the tables' contents."""

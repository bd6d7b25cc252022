"""Questions asked of the tables: real-time metrics, table health, the ingest's report, anomaly
detection, and the same tables read by DuckDB and pyiceberg."""

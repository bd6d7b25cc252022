"""DuckDB's S3 secret: the credential chain on AWS, the session's keys for an emulator or a role."""

from __future__ import annotations

from icestream.config import load_settings
from icestream.queries import duckdb_engine as duck


def test_on_aws_duckdb_uses_the_credential_chain_and_aws_endpoints() -> None:
    sql = duck.s3_secret_sql(load_settings(profile="aws", warehouse="s3://lake/wh", region="eu-west-1"))
    assert sql == "CREATE OR REPLACE SECRET icestream_s3 (TYPE s3, REGION 'eu-west-1', PROVIDER credential_chain)"


def test_an_emulator_gets_its_endpoint_path_style_plain_http_and_dummy_keys() -> None:
    sql = duck.s3_secret_sql(load_settings(profile="localstack", kinesis_endpoint="http://127.0.0.1:4567"))
    assert "KEY_ID 'test', SECRET 'test'" in sql
    assert "ENDPOINT '127.0.0.1:4567', URL_STYLE 'path', USE_SSL false" in sql
    assert "credential_chain" not in sql


def test_a_local_warehouse_loads_no_s3_extension(tmp_path) -> None:
    connection = duck.connect(load_settings(warehouse=str(tmp_path)))
    rows = connection.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()
    loaded = {name for (name,) in rows}
    assert {"avro", "iceberg"} <= loaded
    assert "httpfs" not in loaded


def test_with_show_statements_each_duckdb_statement_prints_as_it_runs(tmp_path, capsys) -> None:
    from icestream.lake.statement import show_statements

    connection = duck.connect(load_settings(warehouse=str(tmp_path)))
    show_statements()
    try:
        frame = duck.statement_frame(connection, duck.duckdb_statement("SELECT $n + 1 AS answer", {"n": 41}))
    finally:
        show_statements(False)
    assert int(frame["answer"][0]) == 42
    assert capsys.readouterr().out == "SELECT $n + 1 AS answer\n-- bound: $n = 41\n\n"

"""Settings: precedence, the documented environment names, and validation at load time."""

from __future__ import annotations

from pathlib import Path

import pytest

from icestream.config import load_settings, project_home
from icestream.errors import ConfigError
from icestream.validation import validate_identifier
from tests.helpers.security import INJECTIONS


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ICESTREAM_* variable from the caller leaks into these tests, and no icestream.yaml."""
    import os

    for key in list(os.environ):
        if key.startswith("ICESTREAM_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("ICESTREAM_HOME", str(tmp_path))


def test_defaults_run_locally_with_no_aws_account() -> None:
    settings = load_settings()
    assert settings.profile == "local"
    assert settings.kinesis_endpoint is None  # read from the emulator's state file
    assert settings.stream_name == "user-events"
    assert settings.table_name == "lake.streaming_analytics.user_events"
    assert settings.rejects_table_name == "lake.streaming_analytics.user_events_rejects"
    assert settings.spark_master == "local[*]"
    assert settings.catalog_type == "jdbc"  # safe for several writing processes
    assert settings.emulator_port == 4567  # where the emulator starts, and is found from any run folder
    assert settings.warehouse_uri == str(project_home() / "data" / "warehouse")
    assert settings.catalog_file == project_home() / "data" / "warehouse" / "catalog.db"


def test_the_catalog_file_follows_the_warehouse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The tests' temporary warehouse must carry its own catalog, never the user's data/.
    monkeypatch.setenv("ICESTREAM_WAREHOUSE", str(tmp_path / "elsewhere"))
    assert load_settings().catalog_file == tmp_path / "elsewhere" / "catalog.db"
    assert load_settings(warehouse="relative/wh").catalog_file == project_home() / "relative" / "wh" / "catalog.db"


def test_the_hadoop_catalog_stays_selectable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESTREAM_CATALOG_TYPE", "hadoop")
    settings = load_settings()
    assert (settings.catalog_type, settings.sources["catalog_type"]) == ("hadoop", "environment")


@pytest.mark.parametrize(
    ("variable", "value", "attribute", "expected"),
    [
        ("ICESTREAM_PROFILE", "localstack", "profile", "localstack"),
        ("ICESTREAM_KINESIS_ENDPOINT", "http://127.0.0.1:4567", "kinesis_endpoint", "http://127.0.0.1:4567"),
        ("ICESTREAM_REGION", "eu-west-1", "region", "eu-west-1"),
        ("ICESTREAM_STREAM_NAME", "clicks", "stream_name", "clicks"),
        ("ICESTREAM_WAREHOUSE", "/tmp/wh", "warehouse", "/tmp/wh"),
        ("ICESTREAM_NAMESPACE", "web", "namespace", "web"),
        ("ICESTREAM_TABLE", "clicks", "table", "clicks"),
        ("ICESTREAM_SPARK_MASTER", "spark://head:7077", "spark_master", "spark://head:7077"),
        ("ICESTREAM_SHARD_COUNT", "8", "shard_count", 8),
        ("ICESTREAM_SPARK_UI", "true", "spark_ui", True),
        ("ICESTREAM_ICEBERG_JARS", "/a.jar, /b.jar", "iceberg_jars", ("/a.jar", "/b.jar")),
        ("ICESTREAM_CATALOG_TYPE", "hadoop", "catalog_type", "hadoop"),
        ("ICESTREAM_SQLITE_JDBC_JAR", "/opt/sqlite-jdbc-3.46.jar", "sqlite_jdbc_jar", "/opt/sqlite-jdbc-3.46.jar"),
        ("ICESTREAM_JAR_SOURCE", "provided", "jar_source", "provided"),
        ("ICESTREAM_SHIP", "package", "ship", "package"),
        ("ICESTREAM_KINESIS_TIMEOUT", "2.5", "kinesis_timeout", 2.5),
        ("ICESTREAM_EMULATOR_PORT", "0", "emulator_port", 0),
    ],
)
def test_documented_environment_variables(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, attribute: str, expected: object
) -> None:
    monkeypatch.setenv(variable, value)
    settings = load_settings()
    assert getattr(settings, attribute) == expected
    assert settings.sources[attribute] == "environment"


def test_precedence_defaults_file_environment_arguments(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("stream_name: from-file\ntable: file_table\nnamespace: file_ns\n")
    monkeypatch.setenv("ICESTREAM_TABLE", "env_table")
    monkeypatch.setenv("ICESTREAM_NAMESPACE", "env_ns")
    settings = load_settings(config_file=config, namespace="arg_ns")
    assert settings.stream_name == "from-file"
    assert settings.table == "env_table"
    assert settings.namespace == "arg_ns"
    assert settings.region == "us-east-1"
    assert settings.sources == {"stream_name": "file settings.yaml", "table": "environment", "namespace": "argument"}


def test_config_file_from_environment_and_project_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "icestream.yaml").write_text("region: eu-central-1\n")
    assert load_settings().region == "eu-central-1"
    other = tmp_path / "other.yaml"
    other.write_text("region: ap-south-1\n")
    monkeypatch.setenv("ICESTREAM_CONFIG", str(other))
    assert load_settings().region == "ap-south-1"


def test_unset_parameters_do_not_hide_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A papermill parameter left at None or "" means "not given".
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", "from-env")
    assert load_settings(stream_name=None).stream_name == "from-env"
    assert load_settings(stream_name="").stream_name == "from-env"


def test_profiles_set_their_defaults() -> None:
    assert load_settings(profile="localstack").kinesis_endpoint == "http://localhost:4566"
    aws = load_settings(profile="aws", warehouse="s3://bucket/warehouse")
    assert (aws.catalog_type, aws.jar_source, aws.kinesis_endpoint) == ("glue", "maven", None)
    assert aws.warehouse_uri == "s3://bucket/warehouse"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"profile": "prod"}, "PROFILE"),
        ({"kinesis_endpoint": "localhost:4566"}, "KINESIS_ENDPOINT"),
        ({"kinesis_endpoint": "ftp://127.0.0.1:1"}, "KINESIS_ENDPOINT"),
        ({"kinesis_endpoint": "http://127.0.0.1:notaport"}, "KINESIS_ENDPOINT"),
        ({"region": "mars"}, "REGION"),
        ({"stream_name": "bad name!"}, "STREAM_NAME"),
        ({"namespace": "analytics; DROP TABLE x"}, "NAMESPACE"),
        ({"table": "1events"}, "TABLE"),
        ({"table": "user-events"}, "TABLE"),
        ({"catalog": "lake.x"}, "CATALOG"),
        ({"spark_master": "localhost"}, "SPARK_MASTER"),
        ({"shard_count": 0}, "SHARD_COUNT"),
        ({"profile": "aws"}, "WAREHOUSE"),  # Glue needs an s3:// warehouse
        ({"warehouse": "s3://bucket/wh"}, "WAREHOUSE"),  # the JDBC catalog's SQLite file needs a local folder
        ({"catalog_type": "hive"}, "CATALOG_TYPE"),
        ({"jar_source": "ivy"}, "JAR_SOURCE"),
        ({"ship": "rsync"}, "SHIP"),
        ({"start_position": "earliest"}, "START_POSITION"),
        ({"changes_format": "avro"}, "CHANGES_FORMAT"),
        ({"changes_mode": "merge-on-write"}, "CHANGES_MODE"),
        ({"emulator_port": 65_536}, "EMULATOR_PORT"),
        ({"emulator_port": -1}, "EMULATOR_PORT"),
        ({"kinesis_timeout": 0}, "KINESIS_TIMEOUT"),
        ({"kinesis_timeout": 601}, "KINESIS_TIMEOUT"),
        ({"kinesis_timeout": "nan"}, "KINESIS_TIMEOUT"),
        ({"kinesis_timeout": "soon"}, "kinesis_timeout: 'soon' is not a valid float"),
    ],
)
def test_invalid_values_fail_at_load_naming_the_setting(overrides: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_settings(**overrides)


def test_invalid_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESTREAM_SHARD_COUNT", "four")
    with pytest.raises(ConfigError, match="ICESTREAM_SHARD_COUNT"):
        load_settings()


def test_unknown_setting_in_file_or_arguments(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("strem_name: typo\n")
    with pytest.raises(ConfigError, match="strem_name"):
        load_settings(config_file=config)
    with pytest.raises(ConfigError, match="tabel"):
        load_settings(tabel="x")


def test_config_file_must_be_a_mapping(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(config_file=config)


@pytest.mark.parametrize("name", ["events", "_private", "Events_2026", "a" * 128])
def test_valid_identifiers(name: str) -> None:
    assert validate_identifier(name) == name


@pytest.mark.parametrize(
    "name", ["", "a" * 129, "1abc", "a.b", "a b", "a;b", "a'--", 'a"b', "a`b", "événements", "a\nb", "t/*x*/"]
)
def test_invalid_identifiers(name: str) -> None:
    with pytest.raises(ConfigError, match="not a valid identifier"):
        validate_identifier(name, "table")


def test_settings_hold_no_credentials() -> None:
    described = " ".join(load_settings().describe()).lower()
    assert "secret" not in described
    assert "access_key" not in described


def test_describe_shows_only_the_settings_named_in_their_order() -> None:
    settings = load_settings(stream_name="named-here")
    shown = settings.describe(["stream_name", "profile"])
    assert list(shown) == ["stream_name", "profile"]
    assert shown["stream_name"] == "named-here  (argument)"
    assert len(settings.describe()) > len(shown)


def test_describe_refuses_a_name_that_is_not_a_setting() -> None:
    with pytest.raises(ConfigError, match="not a setting: stream"):
        load_settings().describe(["stream"])


@pytest.mark.parametrize("catalog_type", ["glue", "hadoop"])
def test_an_s3a_warehouse_is_refused_with_the_s3_spelling(catalog_type: str) -> None:
    # Glue would record s3a:// in every table's location, where Athena and Glue jobs expect s3://.
    with pytest.raises(ConfigError, match=r"WAREHOUSE.*use s3://bucket/warehouse instead"):
        load_settings(profile="aws", catalog_type=catalog_type, warehouse="s3a://bucket/warehouse")


@pytest.mark.parametrize("profile", ["local", "aws"])
def test_the_hadoop_catalog_on_an_s3_warehouse_is_refused_naming_glue(profile: str) -> None:
    # Issue 58: setup created the stream, then Spark failed on the s3:// warehouse ("No FileSystem for scheme").
    with pytest.raises(
        ConfigError,
        match=r"^ICESTREAM_CATALOG_TYPE / catalog_type: hadoop cannot keep tables in the s3:// warehouse "
        r"'s3://bucket/warehouse'.*: use catalog_type glue",
    ):
        load_settings(profile=profile, catalog_type="hadoop", warehouse="s3://bucket/warehouse")
    assert load_settings(catalog_type="hadoop", warehouse="hdfs://namenode/warehouse").catalog_type == "hadoop"


def test_localstack_sends_s3_and_glue_where_kinesis_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    localstack = load_settings(profile="localstack")
    assert (localstack.s3_endpoint, localstack.glue_endpoint) == ("http://localhost:4566",) * 2
    assert (localstack.catalog_type, localstack.warehouse_uri) == ("glue", "s3://icestream-warehouse/warehouse")
    monkeypatch.setenv("ICESTREAM_KINESIS_ENDPOINT", "http://127.0.0.1:4567")
    moved = load_settings(profile="localstack")
    assert (moved.kinesis_endpoint, moved.s3_endpoint, moved.glue_endpoint) == ("http://127.0.0.1:4567",) * 3
    assert moved.sources["s3_endpoint"] == "environment (kinesis_endpoint)"
    # An explicit S3 endpoint (MinIO, say) wins; the aws profile talks to AWS's own endpoints.
    assert load_settings(profile="localstack", s3_endpoint="http://127.0.0.1:9000").s3_endpoint.endswith(":9000")
    aws = load_settings(profile="aws", warehouse="s3://bucket/warehouse")
    assert (aws.s3_endpoint, aws.glue_endpoint) == (None, None)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"s3_endpoint": "localhost:4566"}, "S3_ENDPOINT"),
        ({"glue_endpoint": "ftp://127.0.0.1:1"}, "GLUE_ENDPOINT"),
        ({"glue_catalog_id": "12345"}, "GLUE_CATALOG_ID"),
        ({"s3_sse_type": "aes"}, "S3_SSE_TYPE"),
        ({"s3_sse_key": "alias/lake"}, "S3_SSE_KEY"),  # a key without s3_sse_type=kms
        ({"aws_role_arn": "arn:aws:iam::123:role/x"}, "AWS_ROLE_ARN"),
    ],
)
def test_invalid_aws_settings_name_the_setting(overrides: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=f"ICESTREAM_{named} / "):
        load_settings(profile="aws", warehouse="s3://bucket/warehouse", **overrides)


@pytest.mark.parametrize("name", INJECTIONS)
def test_injection_strings_are_refused_as_names(name: str) -> None:
    # Settings strip surrounding whitespace and read "" as "not given" (a notebook parameter left
    # empty), so those two reach validation as a plain name or the default; the gate sees the rest.
    if name.strip() and name == name.strip():
        for setting in ("namespace", "table", "catalog"):
            with pytest.raises(ConfigError):
                load_settings(**{setting: name})
    with pytest.raises(ConfigError):
        validate_identifier(name)


def test_a_config_file_not_in_utf8_is_one_config_error(tmp_path: Path) -> None:
    config = tmp_path / "latin1.yaml"
    config.write_bytes("# r\u00e9glages\nregion: eu-west-1\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"is not UTF-8 \(byte 0xe9 at offset 3\): save it as UTF-8"):
        load_settings(config_file=config)
    config.write_text("\ufeff# r\u00e9glages\nregion: eu-west-1\n", encoding="utf-8")  # a BOM is UTF-8 too
    assert load_settings(config_file=config).region == "eu-west-1"


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("afile", "afile is a file, not a folder: give a folder's path"),
        ("afile/below", r"afile is a file, not a folder \(the folder .*below would be inside it\)"),
        ("/proc/icestream", "/proc/icestream cannot be written .* when making a folder in /proc"),
    ],
)
def test_a_folder_the_workbook_writes_must_be_one_it_can_write(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, folder: str, message: str
) -> None:
    from icestream.validation import check_writable_folders

    (tmp_path / "afile").write_text("not a folder\n")
    monkeypatch.setenv("ICESTREAM_RUN_DIR", folder)  # relative: under ICESTREAM_HOME, tmp_path
    with pytest.raises(ConfigError, match=f"ICESTREAM_RUN_DIR / run_dir: .*{message}"):
        check_writable_folders(load_settings())
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"], "the check leaves nothing behind"


def test_folders_that_exist_or_can_be_made_pass_and_are_not_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from icestream.validation import check_writable_folders

    (tmp_path / "there").mkdir()
    monkeypatch.setenv("ICESTREAM_WAREHOUSE", "there")
    monkeypatch.setenv("ICESTREAM_RUN_DIR", "not/yet")
    check_writable_folders(load_settings())
    check_writable_folders(
        load_settings(warehouse="s3://bucket/warehouse", catalog_type="glue")
    )  # a URI is the catalog's to check
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["there"]


def test_an_environment_variable_that_names_no_setting_is_refused_with_the_nearest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A typo in the environment was ignored while the same typo in the YAML file was refused (issue 58).
    monkeypatch.setenv("ICESTREAM_SHARD_CONT", "3")
    with pytest.raises(ConfigError, match="ICESTREAM_SHARD_CONT names no setting; did you mean ICESTREAM_SHARD_COUNT"):
        load_settings()


def test_a_typo_in_the_file_or_arguments_names_the_nearest_setting(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("shard_cont: 3\n")
    with pytest.raises(ConfigError, match=r"shard_cont; did you mean shard_count\?"):
        load_settings(config_file=config)


def test_icestream_variables_that_are_not_settings_are_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from icestream.config import NON_SETTING_VARIABLES

    for name in NON_SETTING_VARIABLES:
        if name not in ("ICESTREAM_HOME", "ICESTREAM_CONFIG"):  # those two are read: a value must mean something
            monkeypatch.setenv(name, "1")
    assert load_settings().shard_count == 4


def test_every_icestream_variable_the_project_reads_is_a_setting_or_allowed() -> None:
    """The allow-list is the one place a non-setting ICESTREAM_* name is declared: a name read anywhere
    (the package, tests, bench/, the Makefile, CI) and missing from it would make load_settings refuse it."""
    import re
    import subprocess
    from dataclasses import fields

    from icestream.config import NON_SETTING_VARIABLES, Settings

    root = Path(__file__).resolve().parents[2]  # the checkout (ICESTREAM_HOME is a tmp folder here)
    listed = subprocess.run(
        ["git", "-C", str(root), "grep", "-ohE", r"ICESTREAM_[A-Z0-9_]*[A-Z0-9]", "--", "lib", "tests", "bench",
         "Makefile", ".ci", "notebooks"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    assert listed, "git grep found the names"
    settings = {f"ICESTREAM_{item.name.upper()}" for item in fields(Settings) if item.name != "sources"}
    typos_on_purpose = {"ICESTREAM_SHARD_CONT"}  # this file's and the bad-input campaign's
    unknown = {name for name in listed if re.fullmatch(r"ICESTREAM_[A-Z0-9_]+", name)}
    unknown -= settings | set(NON_SETTING_VARIABLES) | typos_on_purpose | {"ICESTREAM_SOURCES", "ICESTREAM_CHANGES"}
    assert not unknown, f"read but neither a setting nor in config.NON_SETTING_VARIABLES: {sorted(unknown)}"

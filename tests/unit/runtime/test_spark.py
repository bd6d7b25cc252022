"""The session's configuration: the catalog of each type, and Java options appended, never replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from icestream.config import load_settings
from icestream.runtime import spark
from icestream.runtime.jars import JarPlan
from icestream.runtime.java_options import append_java_options

JNI = "/usr/lib/x86_64-linux-gnu/jni"


@pytest.fixture(autouse=True)
def no_cluster_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """No spark-defaults.conf of this machine leaks into the tests."""
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)


def test_the_jdbc_catalog_is_sqlite_in_the_warehouse(tmp_path: Path) -> None:
    settings = load_settings(warehouse=str(tmp_path / "wh"))
    conf = spark.catalog_conf(settings)
    assert conf == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "jdbc",
        "spark.sql.catalog.lake.uri": f"jdbc:sqlite:{tmp_path / 'wh' / 'catalog.db'}",
        "spark.sql.catalog.lake.jdbc.schema-version": "V1",
        "spark.sql.catalog.lake.jdbc.init-catalog-tables": "false",
        "spark.sql.catalog.lake.jdbc.busy_timeout": str(spark.SQLITE_BUSY_TIMEOUT_MS),
        "spark.sql.catalog.lake.warehouse": f"file://{tmp_path / 'wh'}",
    }


def test_the_hadoop_and_glue_catalogs(tmp_path: Path) -> None:
    hadoop = spark.catalog_conf(load_settings(warehouse=str(tmp_path), catalog_type="hadoop"))
    assert (hadoop["spark.sql.catalog.lake.type"], hadoop["spark.sql.catalog.lake.warehouse"]) == (
        "hadoop",
        str(tmp_path),
    )
    glue = spark.catalog_conf(load_settings(profile="aws", warehouse="s3://b/w", region="eu-west-1"))
    assert glue["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    assert glue["spark.sql.catalog.lake.client.region"] == "eu-west-1"
    assert "spark.sql.catalog.lake.type" not in glue


def test_the_glue_catalog_gets_sse_kms_cross_account_endpoints_and_assume_role() -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    role = "arn:aws:iam::123456789012:role/icestream-ingest"
    settings = load_settings(
        profile="aws", warehouse="s3://b/w", region="eu-west-1", s3_sse_type="kms", s3_sse_key=key,
        glue_catalog_id="210987654321", aws_role_arn=role,
    )  # fmt: skip
    conf = spark.catalog_conf(settings)
    prefix = "spark.sql.catalog.lake."
    assert {key_: value for key_, value in conf.items() if key_.startswith(prefix + "s3.")} == {
        prefix + "s3.sse.type": "kms",
        prefix + "s3.sse.key": key,
    }
    assert conf[prefix + "glue.id"] == "210987654321"
    assert conf[prefix + "client.factory"] == "org.apache.iceberg.aws.AssumeRoleAwsClientFactory"
    assert (conf[prefix + "client.assume-role.arn"], conf[prefix + "client.assume-role.region"]) == (role, "eu-west-1")


def test_localstack_sends_the_catalog_and_its_files_to_the_emulator() -> None:
    conf = spark.catalog_conf(load_settings(profile="localstack", kinesis_endpoint="http://127.0.0.1:4567"))
    prefix = "spark.sql.catalog.lake."
    assert conf[prefix + "catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    assert conf[prefix + "glue.endpoint"] == conf[prefix + "s3.endpoint"] == "http://127.0.0.1:4567"
    assert conf[prefix + "s3.path-style-access"] == "true"
    assert conf[prefix + "warehouse"] == "s3://icestream-warehouse/warehouse"


def test_the_region_and_the_drivers_aws_profile_reach_the_executors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "analytics")
    conf = spark.session_conf(load_settings(profile="aws", warehouse="s3://b/w", region="eu-west-1"))
    executor_env = {key: value for key, value in conf.items() if key.startswith("spark.executorEnv.AWS_")}
    assert executor_env == {
        "spark.executorEnv.AWS_REGION": "eu-west-1",
        "spark.executorEnv.AWS_DEFAULT_REGION": "eu-west-1",
        "spark.executorEnv.AWS_PROFILE": "analytics",
    }
    assert spark.aws_executor_conf(load_settings()) == {}  # the local profile talks to no AWS service


@pytest.mark.parametrize(
    ("existing", "options", "expected"),
    [
        ("", {"a": "1"}, "-Da=1"),
        ("-XX:+UseG1GC", {"a": "1"}, "-XX:+UseG1GC -Da=1"),
        # The cluster's own value of a property wins ...
        ("-Da=cluster -Xss4m", {"a": "1", "b": "2"}, "-Da=cluster -Xss4m -Db=2"),
        # ... except the library path, which is extended (a second -D would replace the first).
        ("-Djava.library.path=/opt/hadoop/native -Xss4m", {"java.library.path": JNI},
         f"-Djava.library.path=/opt/hadoop/native:{JNI} -Xss4m"),
        (f"-Djava.library.path={JNI}", {"java.library.path": JNI}, f"-Djava.library.path={JNI}"),
    ],
)  # fmt: skip
def test_java_options_are_appended(existing: str, options: dict[str, str], expected: str) -> None:
    assert append_java_options(existing, options) == expected


def test_cluster_defaults_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# EMR-like defaults\n"
        "spark.driver.extraJavaOptions   -XX:+UseG1GC -XX:OnOutOfMemoryError='kill -9 %p'\n"
        "spark.executor.extraJavaOptions=-verbose:gc\n"
        "spark.master yarn\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark.spark_defaults()["spark.master"] == "yarn"
    conf = spark.java_options(JarPlan("test", library_path=(JNI,)))
    driver = conf["spark.driver.extraJavaOptions"]
    assert driver.startswith("-XX:+UseG1GC -XX:OnOutOfMemoryError='kill -9 %p' -Dlog4j2.configurationFile=file:")
    assert driver.endswith(f" -Djava.library.path={JNI}")
    assert conf["spark.executor.extraJavaOptions"] == f"-verbose:gc -Djava.library.path={JNI}"


def test_no_library_path_without_the_jdbc_driver() -> None:
    conf = spark.java_options(JarPlan("test"))
    assert list(conf) == ["spark.driver.extraJavaOptions"]
    assert "java.library.path" not in conf["spark.driver.extraJavaOptions"]


def test_the_scheduler_pools_the_ingest_uses_are_declared() -> None:
    """Undeclared pools make Spark warn in every notebook that ingests (and run with guessed weights)."""
    import re

    from icestream.ingest.reading.planner import SCHEDULER_POOLS
    from icestream.runtime.spark import FAIR_POOLS

    declared = set(re.findall(r'<pool name="([^"]+)"', FAIR_POOLS.read_text()))
    assert declared == set(SCHEDULER_POOLS.values())
    conf = spark.session_conf(load_settings(catalog_type="hadoop"))
    assert conf["spark.scheduler.allocation.file"] == FAIR_POOLS.as_uri()


def test_the_driver_logs_its_traces_to_the_run_folder(tmp_path: Path) -> None:
    conf = spark.java_options(JarPlan("test"), tmp_path / "run" / spark.SPARK_LOG_NAME)
    assert f"-D{spark.LOG_FILE_PROPERTY}={tmp_path / 'run' / 'spark.log'}" in conf["spark.driver.extraJavaOptions"]
    assert f"${{sys:{spark.LOG_FILE_PROPERTY}:-/dev/null}}" in spark.LOG4J_CONFIG.read_text()  # the file's name


def test_without_a_ui_the_plans_spark_keeps_for_it_are_the_cheap_kind() -> None:
    assert spark.session_conf(load_settings(catalog_type="hadoop"))["spark.sql.ui.explainMode"] == "simple"
    with_ui = spark.session_conf(load_settings(catalog_type="hadoop", spark_ui=True))
    assert "spark.sql.ui.explainMode" not in with_ui  # Spark's own default: the SQL tab shows formatted plans


@pytest.mark.parametrize(
    ("line", "major", "refused"),
    [
        ("4.1", 17, False),
        ("4.1", 21, False),
        ("3.5", 17, False),
        ("3.5", 11, False),
        # Spark 4 is built for Java 17: an 11 would fail at the JVM's first class of Spark's.
        ("4.1", 11, True),
        # Hadoop's login calls Subject.getSubject, which Java 24 and later refuse (docs/stack.md).
        ("4.1", 25, True),
        ("3.5", 25, True),
        ("3.5", 21, True),
    ],
)
def test_java_is_checked_against_the_spark_line_in_one_line(
    monkeypatch: pytest.MonkeyPatch, line: str, major: int, refused: bool
) -> None:
    java = f"/usr/lib/jvm/java-{major}/bin/java"
    monkeypatch.setattr(spark, "java_version", lambda: (major, java))
    monkeypatch.setattr(spark, "default_line_name", lambda: line)
    if not refused:
        assert spark.check_java() == f"Java {major} at {java}"
        return
    with pytest.raises(spark.JavaError) as raised:
        spark.check_java()
    message = str(raised.value)
    assert "\n" not in message
    assert f"Java {major}" in message
    assert f"Spark {line}" in message
    assert "JAVA_HOME" in message
    if major >= 24:
        assert "getSubject" in message

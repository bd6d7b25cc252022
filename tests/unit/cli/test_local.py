"""``icestream doctor``'s version checks and ``setup``'s refusals, without a session or a service."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from icestream import cli
from icestream.cli import local
from icestream.config import load_settings
from icestream.errors import ConfigError, IcestreamError
from icestream.runtime.platforms import find_platform, unsupported_spark_reason
from icestream.stack import spark_line


def test_doctor_refuses_a_spark_of_no_pinned_line_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    emr_8 = find_platform("emr-serverless", "emr-8.0.0")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: emr_8.spark)
    checks = dict(local._doctor_checks(load_settings(), start_spark=False))
    with pytest.raises(IcestreamError) as refused:
        checks["spark"]()
    assert str(refused.value) == f"pyspark {emr_8.spark}: {unsupported_spark_reason(emr_8.spark)}"


@pytest.mark.parametrize("version", ["4.1.1", "3.5.8"])
def test_doctor_accepts_each_pinned_line_and_names_its_iceberg(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    monkeypatch.delenv("ICESTREAM_SPARK_LINE", raising=False)  # make test-spark3.5 sets it
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version)
    checks = dict(local._doctor_checks(load_settings(), start_spark=False))
    line = spark_line(version[:3])
    assert (
        checks["spark"]()
        == f"pyspark {version} (the Spark {line.name} line: Iceberg {line.iceberg}, Scala {line.scala})"
    )


def test_doctor_says_when_the_installed_line_is_not_the_one_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "4.1.1")
    checks = dict(local._doctor_checks(load_settings(spark_line="3.5"), start_spark=False))
    with pytest.raises(
        IcestreamError, match=r"ICESTREAM_SPARK_LINE=3\.5 asks for the Spark 3\.5 line: run `make clean setup`"
    ):
        checks["spark"]()


def test_doctor_reads_pyspark_from_the_path_where_pip_did_not_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark

    def not_from_pip(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_from_pip)  # EMR and Glue: pyspark on PYTHONPATH
    checks = dict(local._doctor_checks(load_settings(), start_spark=False))
    assert checks["spark"]().startswith(f"pyspark {pyspark.__version__} (the Spark ")


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What ``icestream setup`` went on to create: nothing is created, every step is recorded and refused."""
    from icestream.kinesis import clients
    from icestream.lake import table
    from icestream.runtime import spark

    steps: list[str] = []

    def step(name: str) -> object:
        def record(*args: object, **kwargs: object) -> object:
            steps.append(name)
            raise IcestreamError(f"{name} reached")

        return record

    monkeypatch.setattr(clients, "kinesis_client", step("stream"))
    monkeypatch.setattr(table, "setup_tables", step("tables"))
    monkeypatch.setattr(spark, "prepare_runtime", step("spark"))
    return steps


HADOOP_ON_S3 = {"ICESTREAM_CATALOG_TYPE": "hadoop", "ICESTREAM_WAREHOUSE": "s3://bucket/warehouse"}
LONG_TABLE = {"ICESTREAM_TABLE": "t" * 108}


@pytest.mark.parametrize(
    ("arguments", "environment", "message"),
    [
        (["--shards", "0"], {}, "error: --shards 0: a stream has 1 to 500 shards"),
        (["--shards", "501"], {}, "error: --shards 501: a stream has 1 to 500 shards"),
        (["--shards", "-1"], {}, "error: --shards -1: a stream has 1 to 500 shards"),
        ([], LONG_TABLE, "error: ICESTREAM_TABLE / table: 'tttttttttttttttttttt...' is 108 characters"),
        ([], HADOOP_ON_S3, "error: ICESTREAM_CATALOG_TYPE / catalog_type: hadoop cannot keep tables in the s3://"),
    ],
)
def test_setup_refuses_a_mistake_before_creating_anything(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    made: list[str],
    arguments: list[str],
    environment: dict[str, str],
    message: str,
) -> None:
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    assert cli.main(["setup", *arguments]) == 2
    err = capsys.readouterr().err
    assert (made, len(err.strip().splitlines())) == ([], 1), err
    assert err.startswith(message), err


def test_the_longest_companion_decides_how_long_a_table_name_may_be(monkeypatch: pytest.MonkeyPatch) -> None:
    suffixes = local.workbook_suffixes()
    assert {"rejects", "device_channels", "crash_demo", "metrics_demo_metrics", "routing_orders"} <= set(suffixes)
    longest = max(map(len, suffixes))
    assert 128 - 1 - longest == 107, "docs/commands.md's setup row names this length"
    load_settings(table="t" * (128 - 1 - longest)).check_companion_names(suffixes)
    with pytest.raises(ConfigError, match=f"at most {128 - 1 - longest} characters"):
        load_settings(table="t" * (128 - longest)).check_companion_names(suffixes)


@pytest.fixture
def existing_two_shard_stream(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """``setup`` against a stream that exists with 2 open shards; the shard counts it asked for are recorded."""
    from icestream.kinesis import clients
    from icestream.lake import table
    from icestream.runtime import spark

    asked: list[int | None] = []

    def two_shards(settings: object, shard_count: int | None = None, **options: object) -> dict[str, object]:
        asked.append(shard_count)
        return {"StreamStatus": "ACTIVE", "OpenShardCount": 2}

    monkeypatch.setenv("ICESTREAM_KINESIS_ENDPOINT", "http://127.0.0.1:4599")
    monkeypatch.delenv("ICESTREAM_SHARD_COUNT", raising=False)
    monkeypatch.setattr(clients, "ensure_stream", two_shards)

    def runtime_creating_the_namespace(settings: object, creates_namespace: bool = False) -> object:
        assert creates_namespace, "setup creates the Glue database: the pre-flight check must let it be missing"
        return settings

    monkeypatch.setattr(spark, "prepare_runtime", runtime_creating_the_namespace)
    monkeypatch.setattr(spark, "start_session", lambda runtime, **options: None)
    monkeypatch.setattr(table, "setup_tables", lambda session, settings: [])
    return asked


@pytest.mark.parametrize(
    ("arguments", "environment", "asked_for"),
    [
        (["--shards", "3"], {}, "--shards 3"),
        ([], {"ICESTREAM_SHARD_COUNT": "3"}, "ICESTREAM_SHARD_COUNT / shard_count 3"),
    ],
)
def test_setup_says_when_an_existing_stream_keeps_other_shards_than_asked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    existing_two_shard_stream: list[int | None],
    arguments: list[str],
    environment: dict[str, str],
    asked_for: str,
) -> None:
    # Issue 58: setup --shards 3 on a 2-shard stream exited 0 and the stream stayed at 2, without a word.
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    assert cli.main(["setup", *arguments]) == 0
    assert existing_two_shard_stream == [3 if arguments else None]
    notices = [line for line in capsys.readouterr().err.splitlines() if line.startswith("notice:")]
    assert len(notices) == 1, notices
    assert notices[0].startswith(
        f"notice: stream user-events exists with 2 open shards; {asked_for} was not applied"
    ), notices[0]
    assert "aws kinesis update-shard-count --stream-name user-events --target-shard-count 3" in notices[0]
    assert "--endpoint-url http://127.0.0.1:4599" in notices[0]
    assert "`AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing aws kinesis" in notices[0], "the emulator's keys"


@pytest.mark.parametrize("arguments", [["--shards", "2"], []])
def test_setup_says_nothing_of_shards_when_the_stream_has_those_asked_for(
    capsys: pytest.CaptureFixture[str], existing_two_shard_stream: list[int | None], arguments: list[str]
) -> None:
    # Without --shards (and no shard_count set) nothing was asked of an existing stream: the default 4 is a new one's.
    assert cli.main(["setup", *arguments]) == 0
    assert "notice:" not in capsys.readouterr().err


def test_setup_says_at_once_what_it_waits_for_and_gives_up_on_silence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], silent_endpoint: str
) -> None:
    # Issue 58: an endpoint that accepts and never answers had setup silent for 120 s.
    from icestream.lake import table
    from icestream.runtime import spark

    made: list[str] = []
    monkeypatch.setattr(spark, "prepare_runtime", lambda settings, **options: made.append("spark"))
    monkeypatch.setattr(table, "setup_tables", lambda session, settings: made.append("tables"))
    monkeypatch.setenv("ICESTREAM_KINESIS_ENDPOINT", silent_endpoint)
    monkeypatch.setenv("ICESTREAM_KINESIS_TIMEOUT", "0.2")
    assert cli.main(["setup"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith(f"waiting for the Kinesis endpoint at {silent_endpoint} (at most 0.2 s")
    assert err.startswith(f"error: Kinesis at {silent_endpoint} does not answer: it accepted the connection"), err
    assert (made, len(err.splitlines())) == ([], 1), "no table, one line"


def test_doctor_says_what_it_waits_for_before_the_kinesis_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], silent_endpoint: str
) -> None:
    monkeypatch.setenv("ICESTREAM_KINESIS_ENDPOINT", silent_endpoint)
    monkeypatch.setenv("ICESTREAM_KINESIS_TIMEOUT", "0.2")
    cli.main(["doctor", "--quick"])
    lines = capsys.readouterr().out.splitlines()
    kinesis = [line for line in lines if line[5:].startswith("kinesis ")]
    assert len(kinesis) == 2, lines
    assert kinesis[0] == (
        f"     kinesis   waiting for the Kinesis endpoint at {silent_endpoint} (at most 0.2 s a call, 1 try: "
        "ICESTREAM_KINESIS_TIMEOUT) ..."
    )
    assert kinesis[1].startswith(f"FAIL kinesis   Kinesis at {silent_endpoint} does not answer: it accepted"), kinesis


@pytest.fixture
def kafka_topic_of(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``setup --kafka`` against a broker on 127.0.0.1:9 whose topic has the partitions put in the returned list
    (none there: it does not exist yet); each partition count asked of ``ensure_topic`` is appended to it."""
    from icestream.kafka import connection, topics

    present: list[int] = []

    def ensure(kafka: object, partition_count: int, topic: str | None = None) -> bool:
        made = not present
        present.append(partition_count)
        return made

    monkeypatch.setattr(
        connection, "kafka_connection", lambda settings: connection.KafkaConnection("127.0.0.1:9", settings.kafka_topic)
    )
    monkeypatch.setattr(topics, "ensure_topic", ensure)
    monkeypatch.setattr(topics, "partitions", lambda kafka, topic=None: list(range(present[0])))
    return present


@pytest.mark.parametrize(
    ("existing", "arguments", "line", "notice"),
    [
        (None, ["--shards", "3"], "topic user-events: created, 3 partitions on 127.0.0.1:9", None),
        (None, [], "topic user-events: created, 4 partitions on 127.0.0.1:9", None),  # shard_count's default
        (
            2,
            ["--shards", "3"],
            "topic user-events: exists, 2 partitions on 127.0.0.1:9",
            "notice: topic user-events exists with 2 partitions; --shards 3 was not applied",
        ),
        (2, [], "topic user-events: exists, 2 partitions on 127.0.0.1:9", None),  # nothing asked of an existing one
        (5, ["--shards", "3"], "topic user-events: exists, 5 partitions on 127.0.0.1:9", None),  # more is enough
    ],
)
def test_setup_kafka_makes_the_topic_or_says_what_the_existing_one_has(
    capsys: pytest.CaptureFixture[str],
    existing_two_shard_stream: list[int | None],
    kafka_topic_of: list[int],
    existing: int | None,
    arguments: list[str],
    line: str,
    notice: str | None,
) -> None:
    if existing is not None:
        kafka_topic_of.append(existing)
    assert cli.main(["setup", "--kafka", *arguments]) == 0
    out, err = capsys.readouterr()
    assert line in out.splitlines()
    notices = [text for text in err.splitlines() if text.startswith("notice: topic")]
    if notice is None:
        assert notices == []
    else:
        assert len(notices) == 1, notices
        assert notices[0].startswith(notice), notices[0]
        assert "kafka-topics.sh --bootstrap-server 127.0.0.1:9 --alter --topic user-events --partitions 3" in notices[0]


def test_setup_kafka_with_no_broker_is_one_line_before_the_stream_is_made(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    existing_two_shard_stream: list[int | None],
) -> None:
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))  # no local broker has run here
    monkeypatch.delenv("ICESTREAM_KAFKA_BOOTSTRAP", raising=False)
    assert cli.main(["setup", "--kafka"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No Kafka broker: start the local one with `icestream kafka start`"), err
    assert len(err.strip().splitlines()) == 1, err
    assert existing_two_shard_stream == [], "the stream was not touched"

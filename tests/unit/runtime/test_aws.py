"""S3 and Glue settings as each engine needs them: Iceberg's Java properties, executors' environment, boto3."""

from __future__ import annotations

import os

import pytest

from icestream.config import load_settings
from icestream.runtime import aws

ROLE = "arn:aws:iam::123456789012:role/icestream-ingest"
KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch):
    """moto in-process (no network); it puts base keys in the environment, as a real host has some."""
    from moto import mock_aws

    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield os.environ["AWS_ACCESS_KEY_ID"]


def test_iceberg_properties_carry_sse_kms_cross_account_endpoints_and_the_role() -> None:
    settings = load_settings(
        profile="aws", warehouse="s3://lake/wh", region="eu-west-1", s3_sse_type="kms", s3_sse_key=KEY,
        glue_catalog_id="210987654321", aws_role_arn=ROLE, s3_endpoint="https://s3.example.test",
        glue_endpoint="https://glue.example.test",
    )  # fmt: skip
    assert aws.iceberg_properties(settings) == {
        "client.region": "eu-west-1",
        "glue.id": "210987654321",
        "glue.endpoint": "https://glue.example.test",
        "s3.endpoint": "https://s3.example.test",
        "s3.path-style-access": "true",
        "s3.sse.type": "kms",
        "s3.sse.key": KEY,
        "client.factory": "org.apache.iceberg.aws.AssumeRoleAwsClientFactory",
        "client.assume-role.arn": ROLE,
        "client.assume-role.region": "eu-west-1",
        "client.assume-role.session-name": "icestream",
    }
    plain = aws.iceberg_properties(load_settings(profile="aws", warehouse="s3://lake/wh"))
    assert plain == {"client.region": "us-east-1"}  # AWS's endpoints, the caller's account, bucket default SSE


def test_executors_get_the_region_and_the_drivers_profile_never_real_keys() -> None:
    settings = load_settings(profile="aws", warehouse="s3://lake/wh", region="eu-west-1")
    driver = {"AWS_PROFILE": "analytics", "AWS_SECRET_ACCESS_KEY": "real-secret", "HOME": "/home/me"}
    assert aws.executor_environ(settings, driver) == {
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_PROFILE": "analytics",
    }
    localstack = aws.executor_environ(load_settings(profile="localstack"), {})
    assert (localstack["AWS_ACCESS_KEY_ID"], localstack["AWS_SECRET_ACCESS_KEY"]) == ("test", "test")


def test_the_python_side_assumes_the_role_through_sts(fake_aws) -> None:
    settings = load_settings(profile="aws", warehouse="s3://lake/wh", aws_role_arn=ROLE)
    session = aws.session(settings)
    identity = session.client("sts").get_caller_identity()
    assert identity["Arn"].startswith("arn:aws:sts::123456789012:assumed-role/icestream-ingest/icestream")
    assert session.get_credentials().get_frozen_credentials().access_key != fake_aws
    # pyiceberg's pyarrow reads use the assumed role's keys, session token included.
    properties = aws.pyiceberg_properties(settings, session)
    assert properties["s3.access-key-id"] != fake_aws
    assert properties["s3.session-token"]
    without_role = aws.session(load_settings(profile="aws", warehouse="s3://lake/wh"))
    assert without_role.get_credentials().get_frozen_credentials().access_key == fake_aws


def test_pyiceberg_properties_point_at_the_emulator_with_its_dummy_keys() -> None:
    properties = aws.pyiceberg_properties(load_settings(profile="localstack"))
    assert properties == {
        "glue.region": "us-east-1",
        "s3.region": "us-east-1",
        "warehouse": "s3://icestream-warehouse/warehouse",
        "glue.endpoint": "http://localhost:4566",
        "s3.endpoint": "http://localhost:4566",
        "s3.force-virtual-addressing": "false",
        "s3.access-key-id": "test",
        "s3.secret-access-key": "test",
    }
    # On AWS without a role, pyarrow finds credentials itself (AWS_PROFILE, instance role ...).
    assert "s3.access-key-id" not in aws.pyiceberg_properties(load_settings(profile="aws", warehouse="s3://a/b"))


def test_a_cross_account_glue_client_names_the_catalog_in_every_call(fake_aws) -> None:
    from botocore.stub import Stubber

    glue = aws.client(load_settings(profile="aws", warehouse="s3://a/b", glue_catalog_id="210987654321"), "glue")
    with Stubber(glue) as stub:
        stub.add_response(
            "get_table",
            {"Table": {"Name": "t"}},
            expected_params={"DatabaseName": "db", "Name": "t", "CatalogId": "210987654321"},
        )
        assert glue.get_table(DatabaseName="db", Name="t")["Table"]["Name"] == "t"


def test_an_unreachable_emulator_is_a_service_error_that_says_what_to_do() -> None:
    from icestream.errors import ServiceUnavailableError

    settings = load_settings(profile="localstack", kinesis_endpoint="http://127.0.0.1:9")  # discard port: nothing
    with pytest.raises(ServiceUnavailableError, match="could not create the warehouse bucket icestream-warehouse"):
        aws.ensure_bucket(settings)


def test_kinesis_clients_assume_the_role_in_every_process(fake_aws) -> None:
    from icestream.kinesis.clients import kinesis_connection

    connection = kinesis_connection(load_settings(profile="aws", warehouse="s3://a/b", aws_role_arn=ROLE))
    assert connection.role_arn == ROLE  # pickled to the executors, which assume it themselves
    client = connection.client()
    signed: list[str] = []
    client.meta.events.register_last(
        "request-created.kinesis", lambda request, **_: signed.append(str(request.headers["Authorization"]))
    )
    client.list_streams()
    assert signed
    assert f"Credential={fake_aws}/" not in signed[0]  # not the host's keys: the role's
    assert "Credential=" in signed[0]


def test_clients_are_made_from_one_session_per_process_and_environment(monkeypatch, tmp_path) -> None:
    """A new boto3 session parses botocore's models again (88 ms of CPU per client, 2.4 from a kept one)."""
    import threading

    from icestream.kinesis.clients import KinesisConnection

    monkeypatch.setattr(aws, "_kept", {}, raising=False)
    made: list[str] = []
    real = aws.profile_session

    def counted(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(aws, "profile_session", counted)
    monkeypatch.setattr("icestream.kinesis.clients.profile_session", counted)
    settings = load_settings(profile="localstack")
    kinesis = KinesisConnection("local", "us-east-1", "http://127.0.0.1:9")
    for _ in range(3):
        aws.client(settings, "glue")
        kinesis.client()
    assert made == ["localstack", "local"], "one session for Glue and S3, one for Kinesis"

    threads = [threading.Thread(target=kinesis.client) for _ in range(8)]  # clients made in parallel
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == ["localstack", "local"]

    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    kinesis.client()
    assert made == ["localstack", "local", "local"], "credentials from elsewhere: a new session"
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a forked Spark worker
    kinesis.client()
    assert made == ["localstack", "local", "local", "local"], "a forked process makes its own"


GLUE = {"profile": "aws", "warehouse": "s3://icestream-lake/warehouse", "namespace": "streaming_analytics"}


def test_a_glue_session_s_catalog_answers_before_spark_starts(fake_aws) -> None:
    import boto3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="icestream-lake")
    aws.check_catalog_access(load_settings(**GLUE), creates_namespace=True)  # no database yet: setup creates it
    boto3.client("glue", region_name="us-east-1").create_database(DatabaseInput={"Name": GLUE["namespace"]})
    aws.check_catalog_access(load_settings(**GLUE))  # once it is there, every command passes


def test_a_missing_glue_database_is_one_error_for_all_but_setup(fake_aws, monkeypatch) -> None:
    """Ingest, maintain, the queries: one line naming the setting and the fix, before any table is touched."""
    import boto3
    import botocore.client

    from icestream.errors import ConfigError

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="icestream-lake")
    asked = []
    real = botocore.client.BaseClient._make_api_call

    def record(self, operation, params):
        asked.append(operation)
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    message = (
        r"^ICESTREAM_NAMESPACE / namespace: the Glue database streaming_analytics does not exist at AWS Glue in "
        r"us-east-1: run `icestream setup` first"
    )
    with pytest.raises(ConfigError, match=message) as refused:
        aws.check_catalog_access(load_settings(**GLUE))
    assert "\n" not in str(refused.value)
    assert [call for call in asked if call != "AssumeRole"] == ["GetDatabase"], "refused before any table call"


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        ("no bucket", "ICESTREAM_WAREHOUSE / warehouse: the bucket icestream-lake does not exist"),
        ("silent glue", "Glue at http://127.0.0.1:9 does not answer"),
    ],
)
def test_a_bad_glue_setting_is_one_error_that_names_it(fake_aws, problem: str, message: str) -> None:
    import boto3

    from icestream.errors import ConfigError, ServiceUnavailableError

    boto3.client("glue", region_name="us-east-1").create_database(DatabaseInput={"Name": GLUE["namespace"]})
    values = dict(GLUE)
    if problem == "silent glue":
        values["glue_endpoint"] = "http://127.0.0.1:9"  # the discard port: nothing listens
    with pytest.raises((ConfigError, ServiceUnavailableError), match=message):
        aws.check_catalog_access(load_settings(**values))


def test_no_credentials_for_glue_is_one_error(monkeypatch) -> None:
    from icestream.errors import ConfigError

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to find on this machine
    with pytest.raises(ConfigError, match="No AWS credentials for the Glue catalog"):
        aws.check_catalog_access(load_settings(**GLUE))


def test_a_role_that_cannot_be_assumed_is_one_error(fake_aws, monkeypatch) -> None:
    from botocore.exceptions import ClientError

    from icestream.errors import ConfigError

    def refuse(*_args, **_kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not trusted"}}, "AssumeRole")

    monkeypatch.setattr("botocore.credentials.AssumeRoleCredentialFetcher.fetch_credentials", refuse)
    untrusted = "arn:aws:iam::123456789012:role/icestream-untrusted"  # a role no earlier test kept a session of
    with pytest.raises(ConfigError, match=rf"aws_role_arn: {untrusted} could not be assumed \(AccessDenied\)"):
        aws.check_catalog_access(load_settings(**GLUE, aws_role_arn=untrusted))


def test_a_role_that_may_not_ask_is_no_bad_setting(fake_aws, monkeypatch) -> None:
    """The ingest's role has no s3:ListBucket and the maintenance job's no glue:GetDatabase (duties.json)."""
    import boto3
    import botocore.client

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="icestream-lake")
    asked = []
    real = botocore.client.BaseClient._make_api_call

    def deny(self, operation, params):
        if operation in ("GetDatabase", "ListObjectsV2"):
            asked.append(operation)
            raise botocore.exceptions.ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, operation)
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", deny)
    aws.check_catalog_access(load_settings(**GLUE))
    assert asked == ["GetDatabase", "ListObjectsV2"]

"""The Firehose option: off by default, its resources all behind one condition, its roles one duty each,
and its two Lambda handlers run, as the template embeds them, on Firehose's and Lambda's event shapes."""

from __future__ import annotations

import base64
import json
import types
from datetime import UTC, datetime

import pytest

from icestream.deploy import cloudformation
from icestream.deploy.lambdas import handler_source
from icestream.deploy.stack import firehose
from icestream.lake.schema import REQUIRED_FIELDS

TEMPLATE = cloudformation.template()
FIREHOSE_IDS = set(firehose.firehose_resources())


def embedded(module: str) -> types.ModuleType:
    """The handler module as Lambda loads it: from the source text the template carries (index.py)."""
    loaded = types.ModuleType("index")
    exec(compile(handler_source(module), "index.py", "exec"), loaded.__dict__)  # noqa: S102 our own source
    return loaded


def firehose_record(
    record_id: str, payload: bytes, sequence: str = "4959", shard: str = "shardId-000000000001"
) -> dict:
    """One record of a Firehose transformation event from a Kinesis stream source (Firehose's documented shape)."""
    return {
        "recordId": record_id,
        "approximateArrivalTimestamp": 1764633600123,
        "data": base64.b64encode(payload).decode("ascii"),
        "kinesisRecordMetadata": {
            "shardId": shard,
            "partitionKey": "u-0042",
            "approximateArrivalTimestamp": 1764633600123,
            "sequenceNumber": sequence,
            "subsequenceNumber": "",
        },
    }


EVENT = {"event_id": "e-1", "user_id": "u-0042", "event_type": "click", "event_ts": "2025-12-02T00:00:00.000Z",
         "properties": {"page": "/home"}}  # fmt: skip


def test_the_option_is_off_by_default_and_every_resource_waits_for_it() -> None:
    assert TEMPLATE["Parameters"]["FirehoseDelivery"]["Default"] == "DISABLED"
    assert TEMPLATE["Conditions"]["FirehoseEnabled"] == {"Fn::Equals": [{"Ref": "FirehoseDelivery"}, "ENABLED"]}
    assert set(TEMPLATE["Resources"]) >= FIREHOSE_IDS
    assert {TEMPLATE["Resources"][name].get("Condition") for name in FIREHOSE_IDS} == {"FirehoseEnabled"}
    for name, output in TEMPLATE["Outputs"].items():
        if any(logical_id in json.dumps(output["Value"]) for logical_id in FIREHOSE_IDS):
            assert output.get("Condition") == "FirehoseEnabled", name
    assert TEMPLATE["Parameters"]["FirehoseTable"]["Default"] == "user_events"  # Settings.table


def test_the_delivery_stream_writes_the_glue_table_after_the_lambda_and_keeps_the_raw_records() -> None:
    stream = TEMPLATE["Resources"]["DeliveryStream"]["Properties"]
    assert stream["DeliveryStreamType"] == "KinesisStreamAsSource"
    iceberg = stream["IcebergDestinationConfiguration"]
    catalog = "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:catalog"
    assert iceberg["CatalogConfiguration"] == {"CatalogArn": {"Fn::Sub": catalog}}
    assert iceberg["DestinationTableConfigurationList"] == [
        {"DestinationDatabaseName": {"Ref": "Namespace"}, "DestinationTableName": {"Ref": "FirehoseTable"},
         "S3ErrorOutputPrefix": "errors/table/"}
    ]  # fmt: skip
    processor = iceberg["ProcessingConfiguration"]["Processors"][0]
    assert processor == {
        "Type": "Lambda",
        "Parameters": [{"ParameterName": "LambdaArn", "ParameterValue": {"Fn::GetAtt": ["TransformFunction", "Arn"]}}],
    }
    assert iceberg["s3BackupMode"] == "AllData"
    assert iceberg["S3Configuration"]["BucketARN"] == {"Fn::GetAtt": ["RawBackupBucket", "Arn"]}
    assert iceberg["S3Configuration"]["ErrorOutputPrefix"].startswith("errors/")
    rules = TEMPLATE["Resources"]["RawBackupBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert [rule["ExpirationInDays"] for rule in rules] == [{"Ref": "RawBackupRetentionDays"}]
    assert TEMPLATE["Parameters"]["RawBackupRetentionDays"]["Default"] == 30
    (tls,) = TEMPLATE["Resources"]["RawBackupBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert (tls["Effect"], tls["Condition"]) == ("Deny", {"Bool": {"aws:SecureTransport": "false"}})
    assert (
        TEMPLATE["Parameters"]["FirehoseBufferSeconds"] | {"MinValue": 0, "MaxValue": 900}
        == (TEMPLATE["Parameters"]["FirehoseBufferSeconds"])
    )


def _actions(logical_id: str) -> dict[str, set[str]]:
    statements = TEMPLATE["Resources"][logical_id]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    return {statement["Sid"]: set(statement["Action"]) for statement in statements}


def test_each_role_may_do_its_one_duty() -> None:
    delivery = _actions("DeliveryRole")
    everything = set().union(*delivery.values())
    assert {"kinesis:GetRecords", "glue:UpdateTable", "s3:PutObject", "lambda:InvokeFunction"} <= everything
    assert not {action for action in everything if action.endswith("*") or "Create" in action or "Delete" in action} - {
        "s3:DeleteObject"  # Iceberg's writer removes files of a failed commit
    }
    assert set().union(*_actions("TransformFunctionRole").values()) == {
        "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"
    }  # fmt: skip
    publisher = set().union(*_actions("PublisherFunctionRole").values())
    assert publisher - {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"} == {
        "kinesis:PutRecords", "kms:GenerateDataKey"
    }  # fmt: skip
    trust = TEMPLATE["Resources"]["DeliveryRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "firehose.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": {"Fn::Sub": "${AWS::AccountId}"}}}


def test_the_transformation_keeps_the_required_fields_of_the_lake_schema() -> None:
    assert embedded("enrich_records").REQUIRED_FIELDS == REQUIRED_FIELDS


def test_the_transformation_fills_the_ingest_columns_and_answers_every_record() -> None:
    handler = embedded("enrich_records").handler
    records = [
        firehose_record("r-ok", json.dumps(EVENT).encode(), sequence="4959-1"),
        firehose_record("r-not-json", b"{not json"),
        firehose_record("r-no-user", json.dumps({**EVENT, "event_id": "e-2", "user_id": ""}).encode()),
        firehose_record("r-array", b"[1, 2]"),
        firehose_record("r-latin1", b"\xff\xfe"),
        firehose_record("r-repeat", json.dumps(EVENT).encode(), sequence="4959-2"),
        firehose_record("r-second", json.dumps({**EVENT, "event_id": "e-3"}).encode(), sequence="4959-3"),
    ]
    before = datetime.now(UTC)
    answer = handler({"invocationId": "i", "deliveryStreamArn": "arn:d", "region": "eu-west-1", "records": records})
    after = datetime.now(UTC)
    assert [record["recordId"] for record in answer["records"]] == [record["recordId"] for record in records]
    results = {record["recordId"]: record["result"] for record in answer["records"]}
    assert results == {"r-ok": "Ok", "r-not-json": "ProcessingFailed", "r-no-user": "ProcessingFailed",
                       "r-array": "ProcessingFailed", "r-latin1": "ProcessingFailed", "r-repeat": "Dropped",
                       "r-second": "Ok"}  # fmt: skip
    failed = next(record for record in answer["records"] if record["recordId"] == "r-not-json")
    assert failed["data"] == records[1]["data"], "a failed record goes to the error prefix as it came"
    enriched = json.loads(base64.b64decode(answer["records"][0]["data"]))
    assert {key: enriched[key] for key in EVENT} == EVENT
    assert enriched["shard_id"] == "shardId-000000000001"
    assert enriched["sequence_number"] == "4959-1"
    assert enriched["partition_key"] == "u-0042"
    assert enriched["arrival_ts"] == "2025-12-02T00:00:00.123Z"
    ingest = datetime.fromisoformat(enriched["ingest_ts"].replace("Z", "+00:00"))
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= ingest <= after


def test_the_publisher_puts_events_the_transformation_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("STREAM_NAME", "user-events")
    publisher, transform = embedded("publish_events"), embedded("enrich_records")
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        kinesis.create_stream(StreamName="user-events", ShardCount=1)
        assert publisher.handler({"count": 7, "seed": 1}) == {"sent": 7, "failed": 0}
        assert publisher.handler({"events": [EVENT]}) == {"sent": 1, "failed": 0}
        shard = kinesis.list_shards(StreamName="user-events")["Shards"][0]["ShardId"]
        iterator = kinesis.get_shard_iterator(StreamName="user-events", ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        got = kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert len(got) == 8
    assert [json.loads(record["Data"])["user_id"] for record in got] == [record["PartitionKey"] for record in got]
    answer = transform.handler(
        {"records": [firehose_record(str(i), r["Data"], r["SequenceNumber"]) for i, r in enumerate(got)]}
    )
    assert [record["result"] for record in answer["records"]] == ["Ok"] * 8
    with pytest.raises(ValueError, match="count 0"):
        publisher.handler({"count": 0})

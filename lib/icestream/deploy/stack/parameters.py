"""The stack's parameters and conditions: what an operator chooses at deploy time."""

from __future__ import annotations

from typing import Any

from icestream.deploy.stack.common import not_empty, parameter

DEFAULT_RELEASE = "emr-7.12.0"  # the first EMR release with Iceberg 1.10.0 (remove_orphan_files prefix_listing)


def parameters() -> dict[str, Any]:
    """Every parameter, with its default and what it sets."""
    return {
        "StreamName": parameter(
            "String",
            "user-events",
            "The Kinesis stream (ICESTREAM_STREAM_NAME).",
            AllowedPattern="[a-zA-Z0-9_.-]{1,128}",
        ),
        "ShardCount": parameter("Number", 4, "Shards of the stream.", MinValue=1),
        "RetentionHours": parameter(
            "Number", 24, "How long the stream keeps records (hours).", MinValue=24, MaxValue=8760
        ),
        "WarehousePrefix": parameter(
            "String",
            "icestream",
            "Folder of the Iceberg warehouse in the bucket.",
            AllowedPattern="[a-z0-9][a-z0-9_.-]*",
        ),
        "Namespace": parameter(
            "String",
            "streaming_analytics",
            "The Iceberg namespace = the Glue database.",
            AllowedPattern="[a-z_][a-z0-9_]{0,127}",
        ),
        "ArtifactsPrefix": parameter(
            "String",
            "artifacts",
            "Folder in the bucket holding the jobs' entry points and packed environment (icestream_env.tar.gz).",
            AllowedPattern="[a-z0-9][a-z0-9_.-]*",
        ),
        "EmrServerlessApplicationId": parameter(
            "String",
            "",
            "An existing EMR Serverless application for the jobs (with a network configuration in those "
            "subnets, docs/aws.md); empty: the stack creates one.",
            AllowedPattern="[0-9a-z]*",
        ),
        "ReleaseLabel": parameter(
            "String", DEFAULT_RELEASE, "EMR release of the application the stack creates.", AllowedPattern="emr-[0-9.]+"
        ),
        "VpcId": {
            "Type": "AWS::EC2::VPC::Id",
            "Description": "VPC of the jobs (EMR Serverless reaches Kinesis only in one).",
        },
        "PrivateSubnetIds": {
            "Type": "List<AWS::EC2::Subnet::Id>",
            "Description": "Private subnets of the jobs, in that VPC (one per Availability Zone).",
        },
        "PrivateRouteTableIds": parameter(
            "CommaDelimitedList", "", "Route tables of those subnets, for the S3 gateway endpoint; empty: none."
        ),
        "IngestScheduleExpression": parameter("String", "rate(15 minutes)", "When the ingest job drains the stream."),
        "MaintenanceScheduleExpression": parameter(
            "String", "cron(30 2 * * ? *)", "When `icestream maintain` runs (UTC)."
        ),
        "SchedulesState": parameter("String", "ENABLED", "ENABLED or DISABLED.", AllowedValues=["ENABLED", "DISABLED"]),
        "StreamingJob": parameter(
            "String",
            "DISABLED",
            "ENABLED: a long-running streaming ingest job (restarted by its schedule) instead of the "
            "AvailableNow ingest schedule.",
            AllowedValues=["ENABLED", "DISABLED"],
        ),
        "StreamingTrigger": parameter("String", "30s", "The streaming job's processing-time trigger."),
        "StreamingTimeoutMinutes": parameter(
            "Number",
            1430,
            "The streaming job's execution timeout; keep it below the restart interval.",
            MinValue=60,
            MaxValue=1000000,
        ),
        "StreamingScheduleExpression": parameter(
            "String", "rate(1 day)", "When the streaming job is (re)started after its timeout ended the last run."
        ),
        "AlarmEmail": parameter("String", "", "Email for the alarms' SNS topic; empty: no subscription."),
        "IteratorAgeAlarmMilliseconds": parameter(
            "Number",
            3600000,
            "Alarm when the stream's oldest unread record (GetRecords.IteratorAgeMilliseconds) is older.",
            MinValue=60000,
        ),
    }


def conditions() -> dict[str, Any]:
    """Conditions: an application created or given, batch or streaming ingest, optional endpoint and email."""
    return {
        "HasApplicationId": not_empty("EmrServerlessApplicationId"),
        "CreateApplication": {"Fn::Not": [{"Condition": "HasApplicationId"}]},
        "HasGatewayEndpoint": {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": "PrivateRouteTableIds"}]}, ""]}]},
        "StreamingEnabled": {"Fn::Equals": [{"Ref": "StreamingJob"}, "ENABLED"]},
        "BatchIngest": {"Fn::Not": [{"Condition": "StreamingEnabled"}]},
        "HasAlarmEmail": not_empty("AlarmEmail"),
    }


def application_id() -> dict[str, Any]:
    """The application the jobs run on: the one created here, or the one given."""
    return {
        "Fn::If": [
            "CreateApplication",
            {"Fn::GetAtt": ["Application", "ApplicationId"]},
            {"Ref": "EmrServerlessApplicationId"},
        ]
    }

"""The managed alternative (``FirehoseDelivery=ENABLED``, off by default): Firehose from the stream into the table.

A Firehose delivery stream reads the Kinesis stream and writes the same Glue Iceberg table the EMR
ingest writes (Firehose's Iceberg destination), after a transformation Lambda
(:mod:`icestream.deploy.lambdas.enrich_records`) fills the table's ingest metadata columns. Every
source record is kept as it came in a raw backup bucket for ``RawBackupRetentionDays`` (30 by default),
beside the records that failed, under their error prefix. A test publisher Lambda
(:mod:`~icestream.deploy.lambdas.publish_events`) puts sample events into the stream. Each role may
do its one duty only; every resource here carries the ``FirehoseEnabled`` condition. docs/aws.md
compares the two ingests.
"""

from __future__ import annotations

from typing import Any

from icestream.config import Settings
from icestream.deploy.lambdas import handler_source
from icestream.deploy.stack.common import ARN, document, parameter, private_bucket, sub, tls_only

CONDITION = "FirehoseEnabled"
RUNTIME = "python3.12"
RAW_PREFIX = "raw/"  # every source record as it came (Firehose's s3BackupMode AllData)
ERROR_PREFIX = "errors/!{firehose:error-output-type}/"  # records Firehose or the Lambda could not deliver
TABLE_ERROR_PREFIX = "errors/table/"  # records the table refused
GLUE = f"{ARN}:glue:${{AWS::Region}}:${{AWS::AccountId}}"
LOGS = f"{ARN}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group"
FUNCTIONS = {  # logical id -> (handler module, what it does)
    "TransformFunction": ("enrich_records", "Firehose transformation: the table's ingest metadata columns"),
    "PublisherFunction": ("publish_events", "test publisher: sample events into the stream"),
}


def firehose_parameters() -> dict[str, Any]:
    """The option and its settings."""
    return {
        "FirehoseDelivery": parameter(
            "String",
            "DISABLED",
            "ENABLED: a Firehose delivery stream also writes the stream into the table (docs/aws.md compares).",
            AllowedValues=["ENABLED", "DISABLED"],
        ),
        "FirehoseTable": parameter(
            "String",
            Settings.table,
            "The Iceberg table in the namespace Firehose delivers to (ICESTREAM_TABLE); it must exist.",
            AllowedPattern="[a-z_][a-z0-9_]{0,127}",
        ),
        "FirehoseBufferSeconds": parameter(
            "Number", 300, "How long Firehose buffers before it commits (0-900 s).", MinValue=0, MaxValue=900
        ),
        "RawBackupRetentionDays": parameter(
            "Number", 30, "Days the raw backup bucket keeps source records and errors.", MinValue=1
        ),
    }


def firehose_conditions() -> dict[str, Any]:
    """``FirehoseEnabled``: the option is on."""
    return {CONDITION: {"Fn::Equals": [{"Ref": "FirehoseDelivery"}, "ENABLED"]}}


def _log_statement(function: str) -> dict[str, Any]:
    group = f"{LOGS}:/aws/lambda/${{AWS::StackName}}-{function}"
    return {
        "Sid": "OwnLogs",
        "Effect": "Allow",
        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": [group, f"{group}:*"],
    }


def _role(description: str, trust: dict[str, Any], *statements: dict[str, Any]) -> dict[str, Any]:
    return {
        "Type": "AWS::IAM::Role",
        "Condition": CONDITION,
        "Properties": {
            "Description": description,
            "AssumeRolePolicyDocument": sub(trust),
            "Policies": [{"PolicyName": "icestream", "PolicyDocument": sub(document(*statements))}],
        },
    }


def _trust(service: str, condition: dict[str, Any]) -> dict[str, Any]:
    return document(
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": service}, "Condition": condition}
    )


def _via(service: str) -> dict[str, Any]:
    return {"StringEquals": {"kms:ViaService": f"{service}.${{AWS::Region}}.amazonaws.com"}}


def delivery_statements() -> list[dict[str, Any]]:
    """What Firehose's role may do: read the stream, commit the one table, write its files and the backup."""
    warehouse = f"{ARN}:s3:::${{WarehouseBucket}}"
    backup = "${RawBackupBucket.Arn}"
    return [
        {
            "Sid": "ReadStream",
            "Effect": "Allow",
            "Action": [
                "kinesis:DescribeStream",
                "kinesis:GetShardIterator",
                "kinesis:GetRecords",
                "kinesis:ListShards",
            ],
            "Resource": "${Stream.Arn}",
        },
        {
            "Sid": "CommitTable",
            "Effect": "Allow",
            "Action": ["glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"],
            "Resource": [
                f"{GLUE}:catalog",
                f"{GLUE}:database/${{Namespace}}",
                f"{GLUE}:table/${{Namespace}}/${{FirehoseTable}}",
            ],
        },
        {
            "Sid": "ListBuckets",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
            "Resource": [warehouse, backup],
        },
        {
            "Sid": "TableFilesAndBackup",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            "Resource": [f"{warehouse}/${{WarehousePrefix}}/${{Namespace}}.db/${{FirehoseTable}}/*", f"{backup}/*"],
        },
        {
            "Sid": "StreamKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt"],
            "Resource": "${DataKey.Arn}",
            "Condition": _via("kinesis"),
        },
        {
            "Sid": "FilesKey",
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": "${DataKey.Arn}",
            "Condition": _via("s3"),
        },
        {
            "Sid": "Transform",
            "Effect": "Allow",
            "Action": ["lambda:InvokeFunction", "lambda:GetFunctionConfiguration"],
            "Resource": "${TransformFunction.Arn}",
        },
        {
            "Sid": "DeliveryLogs",
            "Effect": "Allow",
            "Action": ["logs:PutLogEvents"],
            "Resource": f"{LOGS}:/aws/kinesisfirehose/${{AWS::StackName}}:*",
        },
    ]


def publisher_statements() -> list[dict[str, Any]]:
    """What the test publisher's role may do beyond its logs: put records into the one stream."""
    return [
        {"Sid": "PutRecords", "Effect": "Allow", "Action": ["kinesis:PutRecords"], "Resource": "${Stream.Arn}"},
        {
            "Sid": "StreamKey",
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey"],
            "Resource": "${DataKey.Arn}",
            "Condition": _via("kinesis"),
        },
    ]


def _function(logical_id: str, environment: dict[str, Any] | None = None) -> dict[str, Any]:
    module, description = FUNCTIONS[logical_id]
    properties: dict[str, Any] = {
        "FunctionName": {"Fn::Sub": f"${{AWS::StackName}}-{module}"},
        "Description": f"icestream {description}",
        "Runtime": RUNTIME,
        "Handler": "index.handler",  # CloudFormation writes Code.ZipFile as index.py
        "Role": {"Fn::GetAtt": [f"{logical_id}Role", "Arn"]},
        "Timeout": 60,
        "MemorySize": 256,
        "Code": {"ZipFile": handler_source(module)},
    }
    if environment:
        properties["Environment"] = {"Variables": environment}
    return {"Type": "AWS::Lambda::Function", "Condition": CONDITION, "Properties": properties}


def _delivery_stream() -> dict[str, Any]:
    role = {"Fn::GetAtt": ["DeliveryRole", "Arn"]}
    return {
        "Type": "AWS::KinesisFirehose::DeliveryStream",
        "Condition": CONDITION,
        "Properties": {
            "DeliveryStreamName": {"Fn::Sub": "${AWS::StackName}-iceberg"},
            "DeliveryStreamType": "KinesisStreamAsSource",
            "KinesisStreamSourceConfiguration": {
                "KinesisStreamARN": {"Fn::GetAtt": ["Stream", "Arn"]},
                "RoleARN": role,
            },
            "IcebergDestinationConfiguration": {
                "RoleARN": role,
                "CatalogConfiguration": {"CatalogArn": sub(f"{GLUE}:catalog")},
                "DestinationTableConfigurationList": [
                    {
                        "DestinationDatabaseName": {"Ref": "Namespace"},
                        "DestinationTableName": {"Ref": "FirehoseTable"},
                        "S3ErrorOutputPrefix": TABLE_ERROR_PREFIX,
                    }
                ],
                "BufferingHints": {"IntervalInSeconds": {"Ref": "FirehoseBufferSeconds"}, "SizeInMBs": 128},
                "ProcessingConfiguration": {
                    "Enabled": True,
                    "Processors": [
                        {
                            "Type": "Lambda",
                            "Parameters": [
                                {
                                    "ParameterName": "LambdaArn",
                                    "ParameterValue": {"Fn::GetAtt": ["TransformFunction", "Arn"]},
                                }
                            ],
                        }
                    ],
                },
                "RetryOptions": {"DurationInSeconds": 300},
                "s3BackupMode": "AllData",
                "S3Configuration": {
                    "BucketARN": {"Fn::GetAtt": ["RawBackupBucket", "Arn"]},
                    "RoleARN": role,
                    "Prefix": RAW_PREFIX,
                    "ErrorOutputPrefix": ERROR_PREFIX,
                    "CompressionFormat": "GZIP",
                    "EncryptionConfiguration": {
                        "KMSEncryptionConfig": {"AWSKMSKeyARN": {"Fn::GetAtt": ["DataKey", "Arn"]}}
                    },
                },
                "CloudWatchLoggingOptions": {
                    "Enabled": True,
                    "LogGroupName": {"Fn::Sub": "/aws/kinesisfirehose/${AWS::StackName}"},
                    "LogStreamName": "iceberg",
                },
            },
        },
    }


def firehose_resources() -> dict[str, Any]:
    """The delivery stream, its backup bucket (TLS only), the two functions and the three roles, by logical id."""
    lambda_trust = _trust("lambda.amazonaws.com", {"StringEquals": {"aws:SourceAccount": "${AWS::AccountId}"}})
    return {
        "RawBackupBucket": {
            "Type": "AWS::S3::Bucket",
            "Condition": CONDITION,
            "Properties": {
                **private_bucket(),
                "LifecycleConfiguration": {
                    "Rules": [
                        {
                            "Id": "RawBackupRetention",
                            "Status": "Enabled",
                            "ExpirationInDays": {"Ref": "RawBackupRetentionDays"},
                            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                        }
                    ]
                },
            },
        },
        "RawBackupBucketPolicy": {
            "Type": "AWS::S3::BucketPolicy",
            "Condition": CONDITION,
            "Properties": {"Bucket": {"Ref": "RawBackupBucket"}, "PolicyDocument": sub(tls_only("RawBackupBucket"))},
        },
        "DeliveryRole": _role(
            "Firehose: the stream into the Iceberg table",
            _trust("firehose.amazonaws.com", {"StringEquals": {"sts:ExternalId": "${AWS::AccountId}"}}),
            *delivery_statements(),
        ),
        "TransformFunctionRole": _role(
            "icestream Firehose transformation: its logs only", lambda_trust, _log_statement("enrich_records")
        ),
        "PublisherFunctionRole": _role(
            "icestream test publisher: put records into the stream",
            lambda_trust,
            _log_statement("publish_events"),
            *publisher_statements(),
        ),
        "TransformFunction": _function("TransformFunction"),
        "PublisherFunction": _function("PublisherFunction", {"STREAM_NAME": {"Ref": "StreamName"}}),
        "DeliveryStream": _delivery_stream(),
    }

"""The CloudFormation template deployed on moto's CloudFormation (moto 5.x, in process).

moto creates the resource types it models and skips the others with a warning; the test lists the
skipped types (``MOTO_UNSUPPORTED``), fails if moto skips anything else, and applies each skipped
resource's properties, resolved from the stack, through moto's own API for that service, so each is
at least a well-formed request. What moto created is read back through the services' APIs and
compared with the parameters the stack was given (not with names written here). Properties moto
accepts without applying are listed (``MOTO_IGNORED``) and checked to be indeed not applied; the
template's unit tests check those instead.

The job starters (Step Functions state machines) moto's CloudFormation makes are read back; then
each deployed definition runs in moto's States Language interpreter (its ``execute_state_machine``
mode, which keeps state machines apart from the ones CloudFormation made). The interpreter has no
EMR Serverless integration, so the Task becomes a Pass state with the same ``Parameters``, in a state
machine of the same name (so the same ARN): the interpreter computes the request, client token
included, for two attempts of one scheduled time, and the request is sent to moto's EMR Serverless.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import time
import warnings

import boto3
import botocore.session
import pytest
from botocore.validate import validate_parameters
from moto import mock_aws
from moto.cloudformation.parsing import get_model_map
from moto.core.config import default_user_config

from icestream.config import load_settings
from icestream.deploy import cloudformation
from icestream.deploy.security import duty_policy, iam_policy
from icestream.deploy.stack import firehose
from icestream.deploy.stack.common import sub
from icestream.deploy.stack.firehose import delivery_statements, publisher_statements
from icestream.deploy.stack.jobs import JOBS, api_names, starter_arns
from icestream.deploy.stack.roles import artifacts_statement, athena_statements
from tests.helpers.cloudformation import NO_VALUE, delivery_stream_request, resolve

REGION = "us-east-1"
MOTO_UNSUPPORTED = {
    "AWS::Glue::Database": "created here with glue.create_database from the resolved DatabaseInput",
    "AWS::S3::BucketPolicy": "applied here with s3.put_bucket_policy",
    "AWS::Scheduler::Schedule": "created here with scheduler.create_schedule; its Input, filled in as the "
    "scheduler does, starts its state machine in moto's Step Functions",
    "AWS::CloudWatch::Alarm": "created here with cloudwatch.put_metric_alarm",
    "AWS::SNS::Subscription": "created here with sns.subscribe",
    "AWS::SNS::TopicPolicy": "applied here with sns.set_topic_attributes",
    "AWS::Athena::WorkGroup": "created here with athena.create_work_group (WorkGroupConfiguration is the API's "
    "Configuration; State is CloudFormation's)",
    "AWS::Athena::NamedQuery": "created here with athena.create_named_query, in the workgroup",
    "AWS::EMRServerless::Application": "created here with emr-serverless.create_application (the stack is given "
    "an application id, so CloudFormation would not create it either)",
    "AWS::KinesisFirehose::DeliveryStream": "created here with firehose.create_delivery_stream from the resolved "
    "properties (FirehoseDelivery=ENABLED only); moto's Firehose stores the Iceberg destination, delivers nothing",
}
OPTIONAL = {"AWS::EMRServerless::Application", "AWS::KinesisFirehose::DeliveryStream"}  # behind false conditions
MOTO_IGNORED = {
    "AWS::Kinesis::Stream": ["StreamEncryption", "StreamModeDetails"],  # moto creates an unencrypted stream
    "AWS::S3::Bucket": [
        "BucketEncryption BucketKeyEnabled",  # the SSE-KMS default itself is applied
        "PublicAccessBlockConfiguration",
        "OwnershipControls",
        "LifecycleConfiguration",
    ],
}
# The scheduler's context attributes for two attempts of one invocation (values as AWS's documentation shows).
SCHEDULED = "2022-03-22T18:59:43Z"
ATTEMPTS = [
    {"<aws.scheduler.execution-id>": "d32c5kddcf5bb8c3", "<aws.scheduler.scheduled-time>": SCHEDULED},
    {"<aws.scheduler.execution-id>": "7e51f0c2a9b4d8e6", "<aws.scheduler.scheduled-time>": SCHEDULED},
]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    """moto's AWS in this process, with dummy credentials that never leave it."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # moto warns about a type it skips whenever it reads the stack (create, describe), so record them all.
    with mock_aws(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = lambda service: boto3.client(service, region_name=REGION)  # noqa: E731
        client.skipped = lambda: {
            match.group(1)
            for warning in caught
            if (match := re.search(r"Tried to parse (\S+) but it's not supported", str(warning.message)))
        }
        yield client


def _deploy(aws, **chosen: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Deploy with a VPC, subnets and route table made in moto, plus ``chosen`` parameters.

    Returns:
        The parameters in force (defaults and given), the outputs, and logical id -> physical id.
    """
    ec2 = aws("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24")["Subnet"]["SubnetId"] for i in (1, 2)]
    route_table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    given = {"VpcId": vpc, "PrivateSubnetIds": ",".join(subnets), "PrivateRouteTableIds": route_table, **chosen}
    defaults = {name: str(spec.get("Default", "")) for name, spec in cloudformation.template()["Parameters"].items()}
    cloudformation_client = aws("cloudformation")
    cloudformation_client.create_stack(
        StackName="icestream",
        TemplateBody=cloudformation.render(),
        Parameters=[{"ParameterKey": key, "ParameterValue": value} for key, value in given.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    stack = cloudformation_client.describe_stacks(StackName="icestream")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
    # moto lists a skipped resource too, without ids: each is applied through its API instead.
    physical = {
        resource["LogicalResourceId"]: resource["PhysicalResourceId"]
        for resource in cloudformation_client.describe_stack_resources(StackName="icestream")["StackResources"]
        if "LogicalResourceId" in resource and "PhysicalResourceId" in resource
    }
    return {**defaults, **given}, outputs, physical


def _inline_policy(aws, role: str, name: str = "icestream") -> dict:
    document = aws("iam").get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
    # moto stores a CloudFormation inline policy as the Python repr of its dictionary (or JSON text), not an object.
    if isinstance(document, str):
        return json.loads(document) if document.startswith('{"') else ast.literal_eval(document)
    return document


def _run(aws, state_machine: str, name: str, state_input: str) -> dict:
    """One execution in moto's interpreter, to its end: its output."""
    sfn = aws("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=state_machine, name=name, input=state_input)["executionArn"]
    for _ in range(100):
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.05)
    assert described["status"] == "SUCCEEDED", described
    return json.loads(described["output"])


def _computed_request(aws, monkeypatch: pytest.MonkeyPatch, machine: dict, schedule_input: str) -> dict:
    """What a deployed state machine's Task would send, as moto's interpreter computes it, for two attempts."""
    probe = json.loads(machine["definition"])
    task = probe["States"]["StartJobRun"]
    probe["States"]["StartJobRun"] = {"Type": "Pass", "Parameters": task["Parameters"], "End": True}
    # moto's execute_state_machine setting (what mock_aws(config=...) sets), for this part only.
    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
    sfn = aws("stepfunctions")
    made = sfn.create_state_machine(name=machine["name"], definition=json.dumps(probe), roleArn=machine["roleArn"])
    assert made["stateMachineArn"] == machine["stateMachineArn"]
    sent = []
    for number, attempt in enumerate(ATTEMPTS):
        text = schedule_input
        for keyword, value in attempt.items():
            text = text.replace(keyword, value)
        sent.append(_run(aws, made["stateMachineArn"], f"attempt-{number}", text))
    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", False)
    assert sent[0] == sent[1]  # a retry is the same start, token included
    return sent[0]


def test_the_stack_deploys_on_moto(aws, monkeypatch: pytest.MonkeyPatch) -> None:
    template = cloudformation.template()
    types = {resource["Type"] for resource in template["Resources"].values()}
    assert types - set(get_model_map()) == set(MOTO_UNSUPPORTED), "update MOTO_UNSUPPORTED and docs/aws.md"
    application = aws("emr-serverless").create_application(name="existing", releaseLabel="emr-7.12.0", type="SPARK")
    chosen = {"StreamName": "clicks", "ShardCount": "2", "Namespace": "moto_lake", "WarehousePrefix": "lake",
              "EmrServerlessApplicationId": application["applicationId"], "AlarmEmail": "ops@example.com",
              "IteratorAgeAlarmMilliseconds": "120000"}  # fmt: skip
    parameters, outputs, physical = _deploy(aws, **chosen)
    account = aws("sts").get_caller_identity()["Account"]
    key_arn = outputs["KeyArn"]
    bucket = outputs["WarehouseUri"].removeprefix("s3://").split("/")[0]
    assert outputs["WarehouseUri"] == f"s3://{bucket}/{parameters['WarehousePrefix']}"

    # The stream, the key, the bucket's SSE-KMS default encryption.
    stream = aws("kinesis").describe_stream_summary(StreamName=parameters["StreamName"])["StreamDescriptionSummary"]
    assert (stream["StreamStatus"], stream["OpenShardCount"]) == ("ACTIVE", int(parameters["ShardCount"]))
    assert stream["RetentionPeriodHours"] == int(parameters["RetentionHours"])
    assert stream["StreamARN"] == outputs["StreamArn"]
    # moto keeps a CloudFormation KeyPolicy object unserialised, and DescribeKey then fails parsing it:
    # the key is checked through ListKeys, ListAliases and GetKeyRotationStatus instead.
    assert key_arn in {key["KeyArn"] for key in aws("kms").list_keys()["Keys"]}
    aliases = {alias["AliasName"]: alias.get("TargetKeyId") for alias in aws("kms").list_aliases()["Aliases"]}
    assert key_arn.endswith(f"key/{aliases['alias/icestream-icestream']}")
    assert aws("kms").get_key_rotation_status(KeyId=key_arn)["KeyRotationEnabled"]
    rule = aws("s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn}

    # Each role's policy, as moto's CloudFormation resolved it, is its duty of the library's policy.
    settings = load_settings(profile="aws", region=REGION, warehouse=outputs["WarehouseUri"],
                             stream_name=parameters["StreamName"], namespace=parameters["Namespace"],
                             kms_key_id=key_arn)  # fmt: skip
    library = iam_policy(settings, account_id=account)
    values = {**parameters, "AWS::Region": REGION, "AWS::AccountId": account, "AWS::Partition": "aws",
              "AWS::StackName": "icestream", "AWS::NoValue": NO_VALUE, "WarehouseBucket": bucket,
              "DataKey.Arn": key_arn, "ApplicationId": application["applicationId"]}  # fmt: skip
    iam = aws("iam")
    for logical_id, duty in {"IngestJobRole": "ingest", "MaintenanceJobRole": "maintenance", "ProducerRole": "producer",
                             "ReaderRole": "reader"}.items():  # fmt: skip
        role = iam.get_role(RoleName=physical[logical_id])["Role"]
        assert role["Arn"] == outputs[f"{logical_id}Arn"]
        values[f"{logical_id}.Arn"] = role["Arn"]
        extra = {"ReaderRole": athena_statements(), "ProducerRole": []}.get(logical_id, [artifacts_statement()])
        expected = duty_policy(library, duty)["Statement"] + [resolve(sub(s), values) for s in extra]
        assert _inline_policy(aws, physical[logical_id])["Statement"] == expected
    ingest_trust = iam.get_role(RoleName=physical["IngestJobRole"])["Role"]["AssumeRolePolicyDocument"]
    ingest_trust = ast.literal_eval(ingest_trust) if isinstance(ingest_trust, str) else ingest_trust
    assert ingest_trust["Statement"][0]["Condition"]["StringEquals"] == {"aws:SourceAccount": account}

    # The network: a Kinesis interface endpoint with private DNS, an S3 gateway on the given route table.
    endpoints = {e["ServiceName"]: e for e in aws("ec2").describe_vpc_endpoints()["VpcEndpoints"]}
    kinesis = endpoints[f"com.amazonaws.{REGION}.kinesis-streams"]
    assert (kinesis["VpcEndpointType"], kinesis["PrivateDnsEnabled"], kinesis["VpcId"]) == (
        "Interface", True, parameters["VpcId"])  # fmt: skip
    assert sorted(kinesis["SubnetIds"]) == sorted(parameters["PrivateSubnetIds"].split(","))
    assert endpoints[f"com.amazonaws.{REGION}.s3"]["RouteTableIds"] == [parameters["PrivateRouteTableIds"]]

    # Failures: the dead-letter queue (KMS), the topic (KMS), the failed-run rule on this application.
    queue = aws("sqs").get_queue_attributes(QueueUrl=outputs["DeadLetterQueueUrl"], AttributeNames=["All"])
    assert queue["Attributes"]["KmsMasterKeyId"] == key_arn
    values["DeadLetterQueue.Arn"] = queue["Attributes"]["QueueArn"]
    topic = aws("sns").get_topic_attributes(TopicArn=outputs["AlarmTopicArn"])["Attributes"]
    assert topic["KmsMasterKeyId"] == key_arn
    rule = aws("events").describe_rule(Name=physical["FailedJobRunRule"])
    assert json.loads(rule["EventPattern"])["detail"] == {
        "state": ["FAILED"],
        "applicationId": [application["applicationId"]],
    }
    values |= {
        "AlarmTopic": outputs["AlarmTopicArn"],
        "FailedJobRunRule.Arn": rule["Arn"],
        "FailedStartRule.Arn": aws("events").describe_rule(Name=physical["FailedStartRule"])["Arn"],
        "Stream": parameters["StreamName"],
    }
    values["DeadLetterQueue.QueueName"] = values["DeadLetterQueue.Arn"].rsplit(":", 1)[1]

    # What moto skipped, applied through its APIs from the stack's own values.
    resources = template["Resources"]
    conditions = {"CreateApplication": False}
    database = resolve(resources["GlueDatabase"]["Properties"]["DatabaseInput"], values, conditions)
    aws("glue").create_database(CatalogId=account, DatabaseInput=database)
    created = aws("glue").get_database(Name=parameters["Namespace"])["Database"]
    assert created["LocationUri"] == f"{outputs['WarehouseUri']}/{parameters['Namespace']}.db"
    policy = resolve(resources["WarehouseBucketPolicy"]["Properties"]["PolicyDocument"], values)
    aws("s3").put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    assert json.loads(aws("s3").get_bucket_policy(Bucket=bucket)["Policy"]) == policy
    topic_policy = resolve(resources["AlarmTopicPolicy"]["Properties"]["PolicyDocument"], values, conditions)
    aws("sns").set_topic_attributes(TopicArn=outputs["AlarmTopicArn"], AttributeName="Policy",
                                    AttributeValue=json.dumps(topic_policy))  # fmt: skip
    subscription = resolve(resources["AlarmSubscription"]["Properties"], values)
    aws("sns").subscribe(**subscription)
    listed = aws("sns").list_subscriptions_by_topic(TopicArn=outputs["AlarmTopicArn"])["Subscriptions"]
    assert [(s["Protocol"], s["Endpoint"]) for s in listed] == [("email", parameters["AlarmEmail"])]
    for name in ("IteratorAgeAlarm", "DeadLetterAlarm"):
        alarm = resolve(resources[name]["Properties"], values)
        alarm["Threshold"] = float(alarm["Threshold"])  # a Number parameter: CloudFormation passes a number
        aws("cloudwatch").put_metric_alarm(AlarmName=name, **alarm)
    (lag,) = aws("cloudwatch").describe_alarms(AlarmNames=["IteratorAgeAlarm"])["MetricAlarms"]
    assert lag["Threshold"] == float(parameters["IteratorAgeAlarmMilliseconds"])
    assert lag["Dimensions"] == [{"Name": "StreamName", "Value": parameters["StreamName"]}]
    network = {
        "JobSecurityGroup": physical["JobSecurityGroup"],
        "PrivateSubnetIds": parameters["PrivateSubnetIds"].split(","),
    }
    app = api_names(resolve(resources["Application"]["Properties"], {**values, **network}))
    made = aws("emr-serverless").create_application(**app)
    described = aws("emr-serverless").get_application(applicationId=made["applicationId"])["application"]
    assert described["releaseLabel"] == parameters["ReleaseLabel"]

    workgroup = resolve(resources["AthenaWorkGroup"]["Properties"], values)
    workgroup["Configuration"] = workgroup.pop("WorkGroupConfiguration")
    assert workgroup.pop("State") == "ENABLED"
    aws("athena").create_work_group(**workgroup)
    made_group = aws("athena").get_work_group(WorkGroup=workgroup["Name"])["WorkGroup"]
    results = made_group["Configuration"]["ResultConfiguration"]
    assert results["OutputLocation"] == f"s3://{bucket}/{parameters['ArtifactsPrefix']}/athena-results/"
    values["AthenaWorkGroup"] = workgroup["Name"]
    queries = {id_: r for id_, r in resources.items() if r["Type"] == "AWS::Athena::NamedQuery"}
    for resource in queries.values():
        aws("athena").create_named_query(**resolve(resource["Properties"], values))
    ids = aws("athena").list_named_queries(WorkGroup=workgroup["Name"])["NamedQueryIds"]
    named = [aws("athena").get_named_query(NamedQueryId=id_)["NamedQuery"] for id_ in ids]
    assert len(named) == len(queries) > 0
    assert {query["Database"] for query in named} == {parameters["Namespace"]}

    scheduler_role_arn = iam.get_role(RoleName=physical["SchedulerRole"])["Role"]["Arn"]
    values["SchedulerRole.Arn"] = scheduler_role_arn
    starter_role = iam.get_role(RoleName=physical["JobStarterRole"])["Role"]
    values["JobStarterRole.Arn"] = starter_role["Arn"]
    trust = starter_role["AssumeRolePolicyDocument"]
    trust = ast.literal_eval(trust) if isinstance(trust, str) else trust
    assert trust["Statement"][0]["Principal"] == {"Service": "states.amazonaws.com"}
    starter_policy = _inline_policy(aws, physical["JobStarterRole"], "start-icestream-job-runs")
    assert [statement["Sid"] for statement in starter_policy["Statement"]] == ["StartJobRuns", "PassJobRoles"]
    assert starter_policy["Statement"][0]["Resource"].endswith(f":/applications/{application['applicationId']}")
    model = botocore.session.get_session().get_service_model("emr-serverless").operation_model("StartJobRun")
    expected_schedules = set()
    for job in JOBS:
        if job.logical_id == "StreamingIngestSchedule":
            assert job.starter not in physical  # the streaming job's starter and schedule: only with StreamingJob
            continue
        # The state machine moto made: its name, role and definition are the template's, resolved.
        machine = aws("stepfunctions").describe_state_machine(stateMachineArn=physical[job.starter])
        values[job.starter] = machine["stateMachineArn"]
        assert machine["name"] == f"icestream-{job.suffix}"
        assert machine["roleArn"] == values["JobStarterRole.Arn"]
        template_definition = resolve(resources[job.starter]["Properties"]["DefinitionString"], values, conditions)
        assert json.loads(machine["definition"]) == json.loads(template_definition)
        properties = resolve(resources[job.logical_id]["Properties"], values, conditions)
        expected_schedules.add(properties["Name"])
        aws("scheduler").create_schedule(**properties)
        target = aws("scheduler").get_schedule(Name=properties["Name"])["Target"]
        assert target["DeadLetterConfig"]["Arn"] == values["DeadLetterQueue.Arn"]
        assert target["Arn"] == machine["stateMachineArn"]
        # What the Task sends on each attempt, as moto's interpreter computes it, as EMR Serverless receives it.
        schedule_arn = aws("scheduler").get_schedule(Name=properties["Name"])["Arn"]
        schedule_input = target["Input"].replace("<aws.scheduler.schedule-arn>", schedule_arn)
        request = api_names(_computed_request(aws, monkeypatch, machine, schedule_input))
        assert request["clientToken"] == hashlib.sha256(f"{schedule_arn}|{SCHEDULED}".encode()).hexdigest()
        validate_parameters(request, model.input_shape)
        run = aws("emr-serverless").start_job_run(**request)
        job_run = aws("emr-serverless").get_job_run(applicationId=run["applicationId"], jobRunId=run["jobRunId"])
        assert job_run["jobRun"]["executionRole"] in (values["IngestJobRole.Arn"], values["MaintenanceJobRole.Arn"])
        assert job_run["jobRun"]["name"] == f"{job.run.name} {SCHEDULED}"
        assert "spark.archives=s3://" in job_run["jobRun"]["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]
    starts = aws("events").describe_rule(Name=physical["FailedStartRule"])
    assert json.loads(starts["EventPattern"])["detail"]["stateMachineArn"] == [
        resolve(sub(arn), values) for arn in starter_arns()
    ]
    assert values["IngestStarter"] in json.loads(starts["EventPattern"])["detail"]["stateMachineArn"]
    # The application's condition is false here (an id is given), so is Firehose's: moto never reads them.
    assert aws.skipped() == set(MOTO_UNSUPPORTED) - OPTIONAL
    assert {schedule["Name"] for schedule in aws("scheduler").list_schedules()["Schedules"]} == expected_schedules


def test_the_firehose_option_deploys_on_moto(aws) -> None:
    """FirehoseDelivery=ENABLED: the functions, the backup bucket and the roles from moto's CloudFormation, read back;
    the delivery stream (which moto's CloudFormation skips) created through moto's Firehose from the stack's values."""
    application = aws("emr-serverless").create_application(name="existing", releaseLabel="emr-7.12.0", type="SPARK")
    chosen = {"StreamName": "clicks", "Namespace": "moto_lake", "FirehoseDelivery": "ENABLED",
              "EmrServerlessApplicationId": application["applicationId"], "FirehoseTable": "clicks_by_firehose",
              "FirehoseBufferSeconds": "60"}  # fmt: skip
    parameters, outputs, physical = _deploy(aws, **chosen)
    account = aws("sts").get_caller_identity()["Account"]
    bucket = outputs["WarehouseUri"].removeprefix("s3://").split("/")[0]
    functions = {name: aws("lambda").get_function(FunctionName=f"icestream-{module}")["Configuration"]
                 for name, (module, _) in firehose.FUNCTIONS.items()}  # fmt: skip
    iam = aws("iam")
    values = {**parameters, "AWS::Region": REGION, "AWS::AccountId": account, "AWS::Partition": "aws",
              "AWS::StackName": "icestream", "AWS::NoValue": NO_VALUE, "WarehouseBucket": bucket,
              "DataKey.Arn": outputs["KeyArn"], "Stream.Arn": outputs["StreamArn"],
              "RawBackupBucket.Arn": f"arn:aws:s3:::{physical['RawBackupBucket']}",
              "TransformFunction.Arn": functions["TransformFunction"]["FunctionArn"]}  # fmt: skip
    for name, configuration in functions.items():
        role = iam.get_role(RoleName=physical[f"{name}Role"])["Role"]
        assert (configuration["Runtime"], configuration["Handler"], configuration["Role"]) == (
            firehose.RUNTIME, "index.handler", role["Arn"])  # fmt: skip
    assert functions["PublisherFunction"]["Environment"]["Variables"] == {"STREAM_NAME": parameters["StreamName"]}
    publisher_policy = _inline_policy(aws, physical["PublisherFunctionRole"])["Statement"][1:]
    assert publisher_policy == [resolve(sub(statement), values) for statement in publisher_statements()]
    delivery_role = iam.get_role(RoleName=physical["DeliveryRole"])["Role"]
    values["DeliveryRole.Arn"] = delivery_role["Arn"]
    expected = [resolve(sub(statement), values) for statement in delivery_statements()]
    assert _inline_policy(aws, physical["DeliveryRole"])["Statement"] == expected

    # The raw backup bucket: SSE-KMS with the stack's key; its 30-day expiry, which moto ignores, applied here.
    backup = physical["RawBackupBucket"]
    rule = aws("s3").get_bucket_encryption(Bucket=backup)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": outputs["KeyArn"],
    }
    with pytest.raises(aws("s3").exceptions.ClientError, match="NoSuchLifecycleConfiguration"):
        aws("s3").get_bucket_lifecycle_configuration(Bucket=backup)
    resources = cloudformation.template()["Resources"]
    (retention,) = resolve(resources["RawBackupBucket"]["Properties"]["LifecycleConfiguration"]["Rules"], values)
    aws("s3").put_bucket_lifecycle_configuration(Bucket=backup, LifecycleConfiguration={"Rules": [{
        "ID": retention["Id"], "Status": retention["Status"], "Filter": {"Prefix": ""},
        "Expiration": {"Days": int(retention["ExpirationInDays"])},
        "AbortIncompleteMultipartUpload": retention["AbortIncompleteMultipartUpload"]}]})  # fmt: skip
    (applied,) = aws("s3").get_bucket_lifecycle_configuration(Bucket=backup)["Rules"]
    assert applied["Expiration"] == {"Days": 30}
    values["RawBackupBucket"] = backup
    policy = resolve(resources["RawBackupBucketPolicy"]["Properties"]["PolicyDocument"], values)
    aws("s3").put_bucket_policy(Bucket=backup, Policy=json.dumps(policy))  # skipped by moto, as the warehouse's
    assert json.loads(aws("s3").get_bucket_policy(Bucket=backup)["Policy"])["Statement"][0]["Resource"] == [
        f"arn:aws:s3:::{backup}", f"arn:aws:s3:::{backup}/*"]  # fmt: skip

    # The delivery stream, through moto's Firehose API, then read back.
    request = delivery_stream_request(resolve(resources["DeliveryStream"]["Properties"], values))
    request["IcebergDestinationConfiguration"]["BufferingHints"]["IntervalInSeconds"] = int(
        parameters["FirehoseBufferSeconds"]
    )  # a Number parameter: CloudFormation passes a number
    aws("firehose").create_delivery_stream(**request)
    described = aws("firehose").describe_delivery_stream(DeliveryStreamName="icestream-iceberg")
    stream = described["DeliveryStreamDescription"]
    assert stream["DeliveryStreamType"] == "KinesisStreamAsSource"
    assert stream["Source"]["KinesisStreamSourceDescription"]["KinesisStreamARN"] == outputs["StreamArn"]
    (destination,) = stream["Destinations"]
    iceberg = destination["IcebergDestinationDescription"]
    assert iceberg["CatalogConfiguration"] == {"CatalogARN": f"arn:aws:glue:{REGION}:{account}:catalog"}
    assert iceberg["DestinationTableConfigurationList"] == [
        {"DestinationDatabaseName": "moto_lake", "DestinationTableName": "clicks_by_firehose",
         "S3ErrorOutputPrefix": firehose.TABLE_ERROR_PREFIX}]  # fmt: skip
    assert iceberg["S3BackupMode"] == "AllData"
    assert iceberg["S3DestinationDescription"]["BucketARN"] == values["RawBackupBucket.Arn"]
    assert iceberg["ProcessingConfiguration"]["Processors"][0]["Parameters"] == [
        {"ParameterName": "LambdaArn", "ParameterValue": values["TransformFunction.Arn"]}]  # fmt: skip
    # moto leaves out an output whose value refers to a resource it skipped: the delivery stream's name.
    assert "DeliveryStreamName" not in outputs
    assert f"--function-name {functions['PublisherFunction']['FunctionName']} " in outputs["PublishTestEventsCommand"]
    # No AlarmEmail here: the subscription's condition is false too.
    assert aws.skipped() == set(MOTO_UNSUPPORTED) - {"AWS::EMRServerless::Application", "AWS::SNS::Subscription"}


def test_moto_ignores_the_properties_listed(aws) -> None:
    """The listed properties really are not applied by moto (if this fails, moto learned them: check them there)."""
    application = aws("emr-serverless").create_application(name="existing", releaseLabel="emr-7.12.0", type="SPARK")
    _, outputs, _ = _deploy(aws, EmrServerlessApplicationId=application["applicationId"])
    summary = aws("kinesis").describe_stream_summary(StreamName="user-events")["StreamDescriptionSummary"]
    assert summary.get("EncryptionType", "NONE") == "NONE"  # StreamEncryption
    bucket = outputs["WarehouseUri"].removeprefix("s3://").split("/")[0]
    rule = aws("s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule.get("BucketKeyEnabled", False) is False
    with pytest.raises(aws("s3").exceptions.ClientError, match="NoSuchPublicAccessBlockConfiguration"):
        aws("s3").get_public_access_block(Bucket=bucket)

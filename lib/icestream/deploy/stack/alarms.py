"""Failures someone sees: a dead-letter queue for the schedules, alarms, and an SNS topic for them.

- ``DeadLetterQueue`` (SQS, KMS-encrypted with the stack's key): a job starter (state machine) the
  scheduler could not start after its retries; ``DeadLetterAlarm`` fires on the first message.
- ``FailedStartRule``: a job starter's execution that ends ``FAILED``, ``TIMED_OUT`` or ``ABORTED``
  (its ``StartJobRun`` failed after the Task's own retries) goes to the topic, as Step Functions'
  "Step Functions Execution Status Change" event.
- ``FailedJobRunRule``: EventBridge's "EMR Serverless Job Run State Change" events with state
  ``FAILED`` for the jobs' application go to the topic (AWS: "Automating EMR Serverless with Amazon
  EventBridge").
- ``IteratorAgeAlarm``: the stream's ``GetRecords.IteratorAgeMilliseconds`` (maximum over 15
  minutes) above ``IteratorAgeAlarmMilliseconds``: the ingest falls behind.
"""

from __future__ import annotations

from typing import Any

from icestream.deploy.stack.common import document, sub
from icestream.deploy.stack.jobs import starter_arns
from icestream.deploy.stack.parameters import application_id


def alarms() -> dict[str, Any]:
    """The queue, the topic (and its optional email subscription), the rule and the alarms."""
    failed_runs = {
        "Sid": "FailedJobRuns",
        "Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": "${AlarmTopic}",
        "Condition": {"ArnEquals": {"aws:SourceArn": ["${FailedJobRunRule.Arn}", "${FailedStartRule.Arn}"]}},
    }
    topic_policy = document(
        failed_runs,
        {
            "Sid": "Alarms",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": "${AlarmTopic}",
            "Condition": {"StringEquals": {"aws:SourceAccount": "${AWS::AccountId}"}},
        },
    )
    to_topic = {"AlarmActions": [{"Ref": "AlarmTopic"}], "OKActions": [{"Ref": "AlarmTopic"}]}
    return {
        "DeadLetterQueue": {
            "Type": "AWS::SQS::Queue",
            "DeletionPolicy": "Delete",  # failed starts are worth days, not the stack's life
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "KmsMasterKeyId": {"Fn::GetAtt": ["DataKey", "Arn"]},
                "MessageRetentionPeriod": 1209600,  # 14 days, SQS's longest: time to look at a failed start
            },
        },
        "AlarmTopic": {
            "Type": "AWS::SNS::Topic",
            "Properties": {"KmsMasterKeyId": {"Fn::GetAtt": ["DataKey", "Arn"]}},
        },
        "AlarmTopicPolicy": {
            "Type": "AWS::SNS::TopicPolicy",
            "Properties": {"Topics": [{"Ref": "AlarmTopic"}], "PolicyDocument": sub(topic_policy)},
        },
        "AlarmSubscription": {
            "Type": "AWS::SNS::Subscription",
            "Condition": "HasAlarmEmail",
            "Properties": {"TopicArn": {"Ref": "AlarmTopic"}, "Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}},
        },
        "FailedJobRunRule": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "Description": "icestream job runs that end FAILED",
                "EventPattern": {
                    "source": ["aws.emr-serverless"],
                    "detail-type": ["EMR Serverless Job Run State Change"],
                    "detail": {"state": ["FAILED"], "applicationId": [application_id()]},
                },
                "Targets": [{"Id": "alarm-topic", "Arn": {"Ref": "AlarmTopic"}}],
            },
        },
        "FailedStartRule": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "Description": "icestream job starts that failed after their retries",
                "EventPattern": {
                    "source": ["aws.states"],
                    "detail-type": ["Step Functions Execution Status Change"],
                    "detail": {"status": ["FAILED", "TIMED_OUT", "ABORTED"], "stateMachineArn": sub(starter_arns())},
                },
                "Targets": [{"Id": "alarm-topic", "Arn": {"Ref": "AlarmTopic"}}],
            },
        },
        "DeadLetterAlarm": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "AlarmDescription": "A scheduled job start failed after its retries (a dead letter)",
                "Namespace": "AWS/SQS",
                "MetricName": "ApproximateNumberOfMessagesVisible",
                "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}],
                "Statistic": "Maximum",
                "Period": 300,
                "EvaluationPeriods": 1,
                "Threshold": 0,
                "ComparisonOperator": "GreaterThanThreshold",
                "TreatMissingData": "notBreaching",
                **to_topic,
            },
        },
        "IteratorAgeAlarm": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "AlarmDescription": "The ingest falls behind: the oldest unread record is older than the threshold",
                "Namespace": "AWS/Kinesis",
                "MetricName": "GetRecords.IteratorAgeMilliseconds",
                "Dimensions": [{"Name": "StreamName", "Value": {"Ref": "Stream"}}],
                "Statistic": "Maximum",
                "Period": 900,
                "EvaluationPeriods": 1,
                "Threshold": {"Ref": "IteratorAgeAlarmMilliseconds"},
                "ComparisonOperator": "GreaterThanThreshold",
                # Between two AvailableNow runs nothing reads, so no data is no alarm; a stopped ingest
                # shows as failed runs (FailedJobRunRule) or dead letters instead.
                "TreatMissingData": "notBreaching",
                **to_topic,
            },
        },
    }

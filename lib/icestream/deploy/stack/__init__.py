"""The parts of the CloudFormation stack :mod:`icestream.deploy.cloudformation` assembles, one concern per module.

``common`` (template helpers), ``parameters`` (parameters and conditions), ``roles`` (IAM roles by
duty), ``jobs`` (EMR Serverless job runs and their schedules), ``network`` (VPC endpoints, security
group, the EMR Serverless application) and ``alarms`` (dead-letter queue, alarms, notifications).
"""

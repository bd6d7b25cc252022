"""Deploying the jobs on AWS: the CloudFormation stack, its IAM policies, Athena's queries, the job upload.

``cloudformation`` writes ``deploy/cloudformation/icestream-stack.yaml`` from ``stack/`` (one concern
per module) and ``security`` (the IAM policy in ``policies/``, and each duty's share of it);
``athena`` holds the named queries the stack creates; ``upload`` is what ``icestream ship --target
emr-serverless|glue`` writes and prints. Running the workbook itself is :mod:`icestream.workbook`.
"""

"""The ingest as a job for schedulers, the role a Glue ETL job or an EMR step plays.

Run it with ``python -m icestream.jobs.ingest --available-now`` or hand the file to ``spark-submit``
(``icestream ship`` prints a ready line with the options that ship icestream to the executors)::

    spark-submit --master spark://HOST:7077 --jars ... --archives ...#icestream_env --py-files ... \\
        --conf spark.pyspark.python=./icestream_env/bin/python .../icestream/jobs/ingest.py --available-now

Its options are those of ``icestream ingest`` (the CLI's own parser) plus ``--config`` and
``--profile``; so is its exit status: 0 when it stopped, 2 for an error a user can fix, printed in one line.

As a Glue job it takes what Glue hands every script: Glue's own arguments (``--JOB_ID``,
``--JOB_RUN_ID``, ``--TempDir``, ... :data:`GLUE_ARGUMENTS`) are accepted and ignored, as Glue's own
``getResolvedOptions`` does, and settings come as job arguments, ``--ICESTREAM_WAREHOUSE
s3://...``, which set the ``ICESTREAM_*`` variables icestream reads (a job has no other way to set
its environment). Any other unknown argument is still an error. The copy ``icestream ship --target ...``
uploads refuses to start in one line when the job's icestream is another build (:mod:`icestream.runtime.build_stamp`).
Under ``spark-submit`` the session keeps the master, jars and Java options given there and adds
the Iceberg catalog and extensions (see :mod:`icestream.runtime.cluster`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from icestream.cli.common import add_common_options, run_handler
from icestream.cli.ingest_command import add_ingest_options, cmd_ingest
from icestream.runtime.build_stamp import refuse_other_build

# Set by `icestream ship --target ...` in the uploaded copy: the build it was shipped with.
SHIPPED_BUILD: str | None = None

# Glue's special job parameters: Glue passes them (with a value each) to the job's script.
GLUE_ARGUMENTS = frozenset(
    (
        "--JOB_ID",
        "--JOB_RUN_ID",
        "--JOB_NAME",
        "--TempDir",
        "--job-bookmark-option",
        "--job-language",
        "--enable-glue-datacatalog",
        "--enable-metrics",
        "--enable-observability-metrics",
        "--enable-continuous-cloudwatch-log",
        "--enable-continuous-log-filter",
        "--continuous-log-logGroup",
        "--continuous-log-logStreamPrefix",
        "--continuous-log-conversionPattern",
        "--enable-spark-ui",
        "--spark-event-logs-path",
        "--enable-job-insights",
        "--enable-auto-scaling",
        "--datalake-formats",
        "--additional-python-modules",
        "--python-modules-installer-option",
        "--extra-files",
        "--extra-py-files",
        "--extra-jars",
        "--user-jars-first",
        "--conf",
        "--scriptLocation",
        "--enable-s3-parquet-optimized-committer",
        "--enable-rename-algorithm-v2",
        "--encryption-type",
        "--redshift-tmp-dir",
        "--executor-cores",
        "--enable-data-lineage",
        "--auto-scale-within-microbatch",
    )
)
SETTING_ARGUMENT = re.compile(r"--(ICESTREAM_[A-Z0-9_]+)")


def split_job_arguments(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Separate Glue's arguments and ``--ICESTREAM_<SETTING> VALUE`` pairs from the job's own options.

    Args:
        argv: The command line after the script's name.

    Returns:
        The job's own options (for :func:`build_parser`), and the settings given as arguments.
    """
    ours: list[str] = []
    settings: dict[str, str] = {}
    tokens = iter(argv)
    for token in tokens:
        name, equals, value = token.partition("=")
        setting = SETTING_ARGUMENT.fullmatch(name)
        if name in GLUE_ARGUMENTS or setting:
            if not equals:
                value = next(tokens, "")
            if setting:
                settings[setting.group(1)] = value
            continue
        if token:  # Glue gives a flag such as --available-now as a job argument with an empty value
            ours.append(token)
    return ours, settings


def build_parser() -> argparse.ArgumentParser:
    """The job's argument parser: ``icestream ingest``'s options."""
    parser = argparse.ArgumentParser(
        prog="icestream.jobs.ingest", description="Stream Kinesis into the Iceberg tables, exactly once."
    )
    add_common_options(parser)
    add_ingest_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the ingest until it stops.

    Args:
        argv: The arguments (default: the command line), Glue's and ``--ICESTREAM_*`` ones included.

    Returns:
        The exit status.
    """
    refused = refuse_other_build(SHIPPED_BUILD)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    ours, settings = split_job_arguments(sys.argv[1:] if argv is None else argv)
    os.environ.update(settings)  # before anything reads settings: the job's environment, as given
    return run_handler(cmd_ingest, build_parser().parse_args(ours))


if __name__ == "__main__":
    sys.exit(main())

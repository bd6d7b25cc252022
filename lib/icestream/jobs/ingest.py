"""The ingest as a job for schedulers, the role a Glue ETL job or an EMR step plays.

Run it with ``python -m icestream.jobs.ingest --available-now`` or hand the file to ``spark-submit``
(``icestream ship`` prints a ready line with the options that ship icestream to the executors)::

    spark-submit --master spark://HOST:7077 --jars ... --archives ...#icestream_env --py-files ... \\
        --conf spark.pyspark.python=./icestream_env/bin/python .../icestream/jobs/ingest.py --available-now

Its options are those of ``icestream ingest`` (the CLI's own parser) plus ``--config`` and
``--profile``; so is its exit status: 0 when it stopped, 2 for an error a user can fix, printed in one line.
Under ``spark-submit`` the session keeps the master, jars and Java options given there and adds
the Iceberg catalog and extensions (see :mod:`icestream.cluster`).
"""

from __future__ import annotations

import argparse
import sys

from icestream.cli.common import add_common_options, run_handler
from icestream.cli.ingest import add_ingest_options, cmd_ingest


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
        argv: The arguments (default: the command line).

    Returns:
        The exit status.
    """
    return run_handler(cmd_ingest, build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

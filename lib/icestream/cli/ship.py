"""``icestream ship``: what a standalone cluster's executors need, or a platform's upload and job lines."""

from __future__ import annotations

import argparse
from pathlib import Path

from icestream.cli.common import settings_from
from icestream.cli.ingest_command import cmd_ship


def cmd_ship_any(args: argparse.Namespace) -> int:
    """``--target cluster`` (the default): :func:`~icestream.cli.ingest_command.cmd_ship`; else
    :func:`ship_to_platform`."""
    if args.target == "cluster" or args.requirements or args.packages:
        return cmd_ship(args)
    return ship_to_platform(args)


def ship_to_platform(args: argparse.Namespace) -> int:
    """``ship --target emr-serverless|glue``: the upload folder, then the upload and job lines."""
    import json

    from icestream.deploy import upload
    from icestream.errors import ConfigError
    from icestream.runtime import shipping

    settings = settings_from(args)
    values = upload.stack_values(json.loads(Path(args.stack_json).read_text())) if args.stack_json else {}
    for pair in args.value or []:
        name, equals, value = pair.partition("=")
        if not equals:
            raise ConfigError(f"--value {pair!r}: write NAME=VALUE, e.g. IngestJobRole.Arn=arn:aws:iam::...")
        values[name] = value
    folder = Path(args.out) if args.out else settings.path("output_dir") / "ship" / args.target
    files = upload.write_entry_points(folder)
    if args.target == "emr-serverless":
        # The image's Python 3.11 is /usr/bin/python3.11 (EMR 7.1+), so the archive links python there.
        archive = shipping.packed_environment(settings, with_package=True, python_prefix="/usr")
        files.append(upload.copy_into(folder, archive, upload.ENV_ARCHIVE))
        jobs = upload.emr_serverless_lines(values)
    else:
        files.append(upload.copy_into(folder, shipping.package_zip(settings), upload.GLUE_ZIP))
        jobs = upload.glue_lines(values)
    print(f"# {args.target}: upload {folder} (icestream {upload.build_id()}), then start the jobs")
    print("\n".join([*upload.upload_lines(files, values), *jobs]))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``ship`` to the ``icestream`` parser."""
    ship = commands.add_parser("ship", help="build what executors or a platform's jobs need; print how to run them")
    ship.add_argument("--requirements", action="store_true", help="print the executors' pinned requirements")
    ship.add_argument(
        "--packages", action="store_true", help="print the JVM packages as a --packages / spark.jars.packages line"
    )
    ship.add_argument(
        "--target",
        choices=("cluster", "emr-serverless", "glue"),
        default="cluster",
        help="cluster: spark-submit to a standalone cluster; emr-serverless, glue: upload and job lines for the stack",
    )
    ship.add_argument("--stack-json", help="`aws cloudformation describe-stacks --stack-name ...` saved as JSON")
    ship.add_argument(
        "--value", action="append", help="NAME=VALUE of a stack value (IngestJobRole.Arn=...); repeatable"
    )
    ship.add_argument("--out", help="the upload folder (default: <output_dir>/ship/<target>)")
    ship.set_defaults(handler=cmd_ship_any)

"""The ``icestream`` command line as a job's entry point (``icestream_cli.py maintain`` on EMR Serverless).

The same as ``python -m icestream.cli``, but a copy stamped by ``icestream ship`` first checks that
it and the job's icestream are one build (:mod:`icestream.runtime.build_stamp`).
"""

from __future__ import annotations

import sys

from icestream.runtime.build_stamp import refuse_other_build

SHIPPED_BUILD: str | None = None


def main(argv: list[str] | None = None) -> int:
    """Check the build, then run the command line.

    Args:
        argv: The arguments (default: the command line).

    Returns:
        The exit status (2 when the builds differ).
    """
    refused = refuse_other_build(SHIPPED_BUILD)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    from icestream.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())

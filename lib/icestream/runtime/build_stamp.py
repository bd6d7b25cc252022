"""One version for a job's code and its uploaded entry points.

``icestream ship --target emr-serverless|glue`` uploads stamped copies of the entry points
(:mod:`icestream.jobs.ingest`, :mod:`icestream.jobs.cli`): their ``SHIPPED_BUILD`` line carries
:func:`build_id` of the package shipped beside them. At start the entry point compares it with the
package the job's Python imports, and refuses in one line when a later ship replaced one but not the
other. Run from the package itself (``python -m icestream.jobs.ingest``) an entry point has nothing to
compare (``SHIPPED_BUILD`` is None).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import icestream
from icestream.errors import ConfigError

PACKAGE = Path(icestream.__file__).resolve().parent
STAMP_LINE = "SHIPPED_BUILD: str | None = None"
_STAMP = re.compile(r"^" + re.escape(STAMP_LINE) + r"$", re.MULTILINE)


def build_id(package: Path = PACKAGE) -> str:
    """``<icestream.__version__>+<digest>``: the version and a digest of the package's files.

    Args:
        package: The ``icestream`` folder (default: the one imported).
    """
    digest = hashlib.sha256()
    files = sorted(
        path
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )
    for path in files:
        for part in (path.relative_to(package).as_posix().encode(), path.read_bytes()):
            digest.update(len(part).to_bytes(8, "big") + part)
    return f"{icestream.__version__}+{digest.hexdigest()[:12]}"


def stamp(source: str, build: str) -> str:
    """An entry point's text with its ``SHIPPED_BUILD`` set to ``build``.

    Raises:
        ConfigError: If the text has no (or more than one) ``SHIPPED_BUILD`` line to stamp.
    """
    stamped, count = _STAMP.subn(f"SHIPPED_BUILD: str | None = {build!r}", source)
    if count != 1:
        raise ConfigError(f"the entry point has {count} '{STAMP_LINE}' lines; it needs exactly one.")
    return stamped


def refuse_other_build(shipped: str | None) -> str:
    """The one line a job prints before refusing to run, or ``""`` when the builds agree.

    Args:
        shipped: The entry point's ``SHIPPED_BUILD``.
    """
    if shipped is None:
        return ""
    here = build_id()
    if shipped == here:
        return ""
    return (
        f"error: this entry point was shipped with icestream {shipped} but the job's Python has icestream {here}; "
        "upload the entry points and the environment from one `icestream ship` run."
    )

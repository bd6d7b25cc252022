"""How an Iceberg table is laid out on storage, walked file by file from its catalog entry.

An Iceberg table is a tree of files, read top down by every engine:

1. the **catalog** maps the table's name to its *current metadata file* (one atomic pointer swap per
   commit is what makes a commit atomic);
2. the **metadata file** (``*.metadata.json``) holds the schema, the partition spec, the properties
   and every *snapshot* (a version of the table) with the location of its manifest list;
3. a **manifest list** (``snap-*.avro``), one per snapshot, lists the manifests that make up that
   snapshot;
4. a **manifest** (``*-m0.avro``) lists data files, with each file's partition, row count and
   column statistics (what lets a reader skip files without opening them);
5. the **data files** (Parquet) hold the rows.

:func:`table_layout` (``LakeTable.layout()``) walks that tree for the current snapshot of any table
through Iceberg's own Java API (the same reads a query plans with), so the names and counts are the
real ones. Notebook 00 walks the tiny table that :func:`icestream.demos.create_layout_demo` makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icestream.lake.inspect import load_iceberg_table, name_of
from icestream.runtime.handles import jvm as jvm_of

if TYPE_CHECKING:
    import pandas as pd

    from icestream.lake.table import LakeTable

LEVELS = ("catalog", "metadata file", "manifest list", "manifest", "data file")
LEVEL_MEANING = {
    "catalog": "maps the table name to its current metadata file",
    "metadata file": "schema, partition spec, properties, snapshots; points at each snapshot's manifest list",
    "manifest list": "one per snapshot: the manifests that make up that snapshot",
    "manifest": "a list of data files with partition, row count and column statistics",
    "data file": "the rows, in Parquet",
}


@dataclass(frozen=True)
class TableLayout:
    """The files of a table's current snapshot, level by level.

    Attributes:
        table: The qualified table name.
        catalog: The catalog's name and type (``lake (jdbc)``).
        snapshot_id: The current snapshot (None for a table with no commit).
        snapshots: Snapshots the metadata file holds.
        nodes: One row per file: ``level`` (one of :data:`LEVELS`), ``name`` (file name),
            ``parent`` (the name of the file that points at it), ``records``, ``bytes`` and ``path``.
    """

    table: str
    catalog: str
    snapshot_id: int | None
    snapshots: int
    nodes: pd.DataFrame

    def levels(self) -> pd.DataFrame:
        """One row per level: how many files, their rows and bytes, and what the level is for."""
        import pandas as pd

        rows = []
        for level in LEVELS:
            at_level = self.nodes[self.nodes["level"] == level]
            rows.append(
                {
                    "level": level,
                    "files": len(at_level),
                    "example": at_level["name"].iloc[0] if len(at_level) else "",
                    "rows": int(at_level["records"].sum()) if level == "data file" else None,
                    "bytes": int(at_level["bytes"].sum()) if at_level["bytes"].notna().any() else None,
                    "what it holds": LEVEL_MEANING[level],
                }
            )
        # Integers, and None where a level has no rows or no size read: pandas shows an Int64 gap as <NA>,
        # which a reader takes for an error; an object column shows a count as itself and the gap as None.
        frame = pd.DataFrame(rows)
        for column in ("rows", "bytes"):
            frame[column] = pd.Series([row[column] for row in rows], dtype=object)
        return frame


def _location(content_file: Any) -> str:
    """A data file's location (``location()`` since Iceberg 1.7; ``path()`` before)."""
    try:
        return str(content_file.location())
    except Exception:  # noqa: BLE001 - py4j raises a generic error for a missing method
        return str(content_file.path())


def table_layout(table: LakeTable, catalog_type: str = "") -> TableLayout:
    """Walk the current snapshot: catalog → metadata file → manifest list → manifests → data files.

    Args:
        table: The table.
        catalog_type: Shown next to the catalog's name (``jdbc``, ``hadoop``, ``glue``).

    Returns:
        The layout; for a table with no commit yet, only the catalog and metadata file levels.
    """
    import pandas as pd

    spark = table.spark
    iceberg = load_iceberg_table(spark, table.name)
    metadata = iceberg.operations().current()
    metadata_file = str(metadata.metadataFileLocation())
    catalog = f"{table.catalog} ({catalog_type})" if catalog_type else table.catalog
    columns = ["level", "name", "parent", "records", "bytes", "path"]
    nodes: list[tuple[str, str, str | None, int | None, int | None, str]] = [
        ("catalog", f"{catalog}: {table.identifier}", None, None, None, ""),
        ("metadata file", name_of(metadata_file), f"{catalog}: {table.identifier}", None, None, metadata_file),
    ]
    snapshot = metadata.currentSnapshot()
    if snapshot is not None:
        manifest_list = str(snapshot.manifestListLocation())
        nodes.append(("manifest list", name_of(manifest_list), name_of(metadata_file), None, None, manifest_list))
        io = iceberg.io()
        manifest_files = jvm_of(spark).org.apache.iceberg.ManifestFiles
        for manifest in snapshot.allManifests(io):
            path = str(manifest.path())
            nodes.append(("manifest", name_of(path), name_of(manifest_list), None, int(manifest.length()), path))
            # With the table's partition specs: Iceberg 1.12 dropped the two-argument read.
            data = str(manifest.content()) == "DATA"
            reader = manifest_files.read(manifest, io, metadata.specsById()) if data else None
            if reader is None:
                continue
            try:
                entries = reader.iterator()  # live entries only: files a later commit deleted are skipped
                while entries.hasNext():
                    data_file = entries.next()
                    location = _location(data_file)
                    nodes.append(
                        (
                            "data file",
                            name_of(location),
                            name_of(path),
                            int(data_file.recordCount()),
                            int(data_file.fileSizeInBytes()),
                            location,
                        )
                    )
            finally:
                reader.close()
    frame = pd.DataFrame(nodes, columns=columns)
    frame["records"] = frame["records"].astype("Int64")
    frame["bytes"] = frame["bytes"].astype("Int64")
    return TableLayout(
        table=table.name,
        catalog=catalog,
        snapshot_id=None if snapshot is None else int(snapshot.snapshotId()),
        snapshots=int(metadata.snapshots().size()),
        nodes=frame,
    )

"""The runner's shared kernel: the notebooks of one run share a kernel and a Spark driver, and each
starts as a new kernel would (empty namespace, counts from 1, Spark's runtime state cleared)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from icestream.workbook.runner import NotebookLeftoverError, run_notebooks

KERNELSPEC = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
# A small local session of its own in the kernel: this is about what one notebook leaves for the next.
SESSION = (
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
)


def notebook(folder: Path, name: str, *sources: str) -> Path:
    path = folder / name
    nbformat.write(new_notebook(cells=[new_code_cell(source) for source in sources], metadata=KERNELSPEC), path)
    return path


def saved(folder: Path, name: str) -> str:
    return (folder / name).read_text()


def test_notebooks_of_a_run_share_one_kernel_and_each_starts_afresh(tmp_path: Path) -> None:
    record = "import os\nopen({!r}, 'w').write(str(os.getpid()))"
    first = notebook(
        tmp_path,
        "01_leaves.ipynb",
        record.format(str(tmp_path / "first")),
        SESSION,
        "left_behind = 1\n"
        "spark.conf.set('spark.wap.branch', 'audit')\n"
        "spark.range(3).createOrReplaceTempView('scratch')\n"
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.figure()",
    )
    second = notebook(
        tmp_path,
        "02_finds.ipynb",
        record.format(str(tmp_path / "second")),
        SESSION,
        "import matplotlib.pyplot as plt\n"
        "views = [t.name for t in spark.catalog.listTables() if t.isTemporary]\n"
        "found = {'names': 'left_behind' in globals(), 'branch': spark.conf.get('spark.wap.branch', None),\n"
        "         'views': views, 'figures': plt.get_fignums()}\n"
        f"open({str(tmp_path / 'found')!r}, 'w').write(repr(found))",
    )
    runs = run_notebooks([first, second], tmp_path / "out", report=lambda _: None, progress=False)

    assert [run.notebook for run in runs] == ["01_leaves.ipynb", "02_finds.ipynb"]
    assert saved(tmp_path, "first") == saved(tmp_path, "second"), "one kernel process for the run"
    assert saved(tmp_path, "found") == repr({"names": False, "branch": None, "views": [], "figures": []})
    copy = nbformat.read(tmp_path / "out" / "02_finds.ipynb", as_version=4)
    assert [cell.execution_count for cell in copy.cells] == [1, 2, 3], "counts start at 1 in every notebook"


def test_a_kernel_per_notebook_on_request(tmp_path: Path) -> None:
    record = "import os\nopen({!r}, 'w').write(str(os.getpid()))"
    paths = [notebook(tmp_path, f"0{n}_alone.ipynb", record.format(str(tmp_path / str(n)))) for n in (1, 2)]
    run_notebooks(paths, tmp_path / "out", report=lambda _: None, progress=False, kernel_per_notebook=True)
    assert saved(tmp_path, "1") != saved(tmp_path, "2")


def test_a_streaming_query_left_running_is_named_and_stopped(tmp_path: Path) -> None:
    leaves = notebook(
        tmp_path,
        "01_streams.ipynb",
        SESSION,
        "query = spark.readStream.format('rate').load().writeStream.format('memory').queryName('left_running').start()",
    )
    after = notebook(tmp_path, "02_after.ipynb", "open({!r}, 'w').write('ran')".format(str(tmp_path / "ran")))
    with pytest.raises(NotebookLeftoverError, match=r"01_streams\.ipynb: .*left_running"):
        run_notebooks([leaves, after], tmp_path / "out", report=lambda _: None, progress=False)
    assert not (tmp_path / "ran").exists(), "the run stops at the notebook that left it"


def test_parameters_for_some_notebooks_only(tmp_path: Path) -> None:
    def parameterised(name: str) -> Path:
        path = tmp_path / name
        cells = [
            new_code_cell("size = 0"),
            new_code_cell(f"open({str(tmp_path / name)!r} + '.size', 'w').write(str(size))"),
        ]
        cells[0].metadata["tags"] = ["parameters"]
        nbformat.write(new_notebook(cells=cells, metadata=KERNELSPEC), path)
        return path

    paths = [parameterised("01_a.ipynb"), parameterised("05_b.ipynb")]
    run_notebooks(
        paths, tmp_path / "out", {"size": 1}, report=lambda _: None, progress=False, overrides={"05": {"size": 5}}
    )
    assert [saved(tmp_path, f"{path.name}.size") for path in paths] == ["1", "5"]


# Another process appends one row to the events table between two notebooks, as an `icestream ingest`
# in a terminal commits while a run goes on (pyiceberg cannot be that process: appending to a table
# partitioned by hours needs pyiceberg-core, which is not installed).
APPEND_ONE_ROW = """
from datetime import UTC, datetime
from icestream import get_spark, load_settings
settings = load_settings()
spark = get_spark(settings)
schema = spark.table(settings.table_name).schema
row = {field.name: None for field in schema} | {"event_id": "from-another-process", "user_id": "u",
       "event_type": "click", "event_ts": datetime(2026, 11, 27, tzinfo=UTC)}
spark.createDataFrame([row], schema).writeTo(settings.table_name).append()
"""


def test_the_next_notebook_reads_what_another_process_committed(
    tmp_path: Path, fresh, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = fresh(shards=1, prefix="afresh")
    monkeypatch.setenv("ICESTREAM_TABLE", made.table)  # the kernel's settings: the test's fresh table
    monkeypatch.setenv("ICESTREAM_STREAM_NAME", made.stream_name)
    count = "from icestream import get_spark, load_settings\nsettings = load_settings()\nspark = get_spark(settings)\n"
    write = "open({!r}, 'w').write(str(spark.table(settings.table_name).count()))"
    first = notebook(
        tmp_path,
        "01_reads.ipynb",
        count + write.format(str(tmp_path / "before")),  # Iceberg's catalog in the JVM now holds the table
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {APPEND_ONE_ROW!r}], check=True)",
    )
    second = notebook(tmp_path, "02_reads_again.ipynb", count + write.format(str(tmp_path / "after")))
    run_notebooks([first, second], tmp_path / "out", report=lambda _: None, progress=False)
    assert (saved(tmp_path, "before"), saved(tmp_path, "after")) == ("0", "1")

"""The change demo's per-batch figures (notebook 06): they add up with the changes read and the table's rows."""

from __future__ import annotations

import shlex

from icestream.cli import build_parser
from icestream.config import Settings
from icestream.demos.change_demo import ChangeDemo, batch_figures, demo_settings
from icestream.ingest.changes import ChangeSpec
from icestream.lake.rowlevel import own_position_deletes
from icestream.lake.summary import BATCH_KEY, POSITIONS_KEY
from icestream.synthetic.entities import ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER, order_changes


def merge_commit(batch: int, added: int, deletes: int, carried: int, totals: tuple[int, int]) -> dict[str, str]:
    """A MERGE's snapshot summary as Iceberg 1.10 writes it, ``carried`` earlier positions in its delete files."""
    summary = {
        BATCH_KEY: str(batch), POSITIONS_KEY: '{"shardId-000000000000":"AFTER:1"}', "added-records": str(added),
        "added-position-deletes": str(deletes + carried), "total-records": str(totals[0]),
        "total-position-deletes": str(totals[1]),
    }  # fmt: skip
    if carried:
        summary["removed-position-deletes"] = str(carried)
    return summary


def progress(batch: int, changes: int, rejected: int) -> dict:
    return {"batch_id": batch, "num_input_rows": changes + rejected, "written": changes, "rejected": rejected,
            "duration_ms": {"total": 1500}}  # fmt: skip


# Four batches on an order table: 5 new orders; 2 new and 3 changed; 4 changed (one deleted); 3 changed, each
# commit's delete files carrying the earlier positions of their data files, as in notebook 06's run.
SUMMARIES = [
    {"operation": "append"},  # no batch id: not the ingest's, left out
    merge_commit(0, added=5, deletes=0, carried=0, totals=(5, 0)),
    merge_commit(1, added=5, deletes=3, carried=0, totals=(10, 3)),
    merge_commit(2, added=4, deletes=4, carried=3, totals=(14, 7)),
    merge_commit(3, added=3, deletes=3, carried=7, totals=(17, 10)),  # added-position-deletes 10, of 7 orders
]
PROGRESS = [progress(0, 6, 1), progress(1, 7, 0), progress(2, 4, 2), progress(3, 5, 0)]


def test_orders_inserted_add_up_to_the_tables_rows_and_changed_ones_were_there_before() -> None:
    figures = batch_figures(PROGRESS, SUMMARIES)
    last = SUMMARIES[-1]
    table_rows = int(last["total-records"]) - int(last["total-position-deletes"])  # rows a read returns
    assert figures["orders inserted"].sum() == table_rows == 7
    already_there = figures["orders inserted"].cumsum().shift(fill_value=0)
    assert (figures["orders changed"] <= already_there).all(), "a batch changes only orders it found"
    assert figures["orders changed"].tolist() == [0, 3, 4, 3]  # not 7 and 10: the carried over are earlier batches'
    assert (figures["changes not applied"] >= 0).all()
    assert (figures["records read"] == figures["changes"] + figures["rejected"]).all()
    assert figures["positions committed"].all()


def test_a_commits_own_position_deletes_leave_out_the_ones_it_carried_over() -> None:
    assert own_position_deletes(SUMMARIES[-1]) == 3
    assert own_position_deletes({"added-records": "3"}) == 0  # an append deletes nothing
    assert own_position_deletes({"added-position-deletes": 2}) == 2


def test_a_batch_without_a_commit_inserted_and_changed_nothing() -> None:
    figures = batch_figures([progress(4, 0, 0)], SUMMARIES)
    assert figures.loc[0, ["orders inserted", "orders changed", "changes not applied"]].tolist() == [0, 0, 0]
    assert not figures.loc[0, "positions committed"]


def test_the_printed_command_is_one_the_cli_takes_with_the_demos_stream_table_and_batch_size() -> None:
    demo = demo_settings(Settings())
    spec = ChangeSpec.parse(ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    command = ChangeDemo(demo, spec, order_changes(orders=5, changes=20, seed=1), [], 50).command
    environment, line = command.split(" icestream ", 1)
    assert environment.split() == [f"ICESTREAM_STREAM_NAME={demo.stream_name}", f"ICESTREAM_TABLE={demo.table}"]
    arguments = build_parser().parse_args(shlex.split(line))
    assert (arguments.changes, arguments.key, arguments.order) == (ORDER_COLUMNS, ORDER_KEY, ORDER_ORDER)
    assert arguments.available_now
    assert arguments.max_records_per_shard == 50

"""A produce run with order events and a field added mid-run writes the truth per table beside its summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icestream import cli
from icestream.config import Settings, load_settings
from icestream.errors import ConfigError
from icestream.producer.run import read_run_summary, run_summary_path
from icestream.synthetic.generator import backfill_config
from icestream.synthetic.second_kind import (
    NEW_FIELD,
    ORDER_EVENT_TYPE,
    id_checksum,
    read_tables_truth,
    tables_truth_path,
)
from tests.helpers.fake_kinesis import AcceptingKinesis


@pytest.fixture
def run_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose run folder is ``tmp_path`` (exported, as the CLI reads the environment)."""
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    return load_settings()


def test_the_cli_backfill_with_orders_and_a_new_field_writes_the_truth_per_table(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = AcceptingKinesis()
    monkeypatch.setattr("icestream.kinesis.clients.kinesis_client", lambda settings, **_: client)
    # No malformed records: the check below parses every payload (a cut one may still start with "{").
    arguments = ["--backfill-hours", "0.5", "--count", "300", "--orders", "0.1", "--new-field-after", "600",
                 "--bad-rate", "0"]  # fmt: skip
    assert cli.main(["produce", *arguments, "--seed", "3", "--anomalies", "none", "--no-progress"]) == 0
    summary = read_run_summary(run_summary_path(run_settings, "backfill"))
    assert summary is not None
    payloads = [json.loads(data) for data in client.data]
    orders = [payload for payload in payloads if payload.get("event_type") == ORDER_EVENT_TYPE]
    assert summary.producer.sent == len(client.data) == 300 + len(orders) > 300
    truths = {truth.table: truth for truth in read_tables_truth(tables_truth_path(run_settings))}
    assert truths["orders"].rows == len(orders) == summary.generator["counts"]["order"]
    assert truths["orders"].id_checksum == id_checksum(order["event_id"] for order in orders)
    assert truths["events"].rows == summary.generator["events"]
    assert 0 < truths["events"].rows_with_new_field < truths["events"].rows
    assert {truth.run_id for truth in truths.values()} == {summary.run_id}
    assert any(NEW_FIELD in payload for payload in payloads)


def test_a_plain_run_writes_no_truth_per_table(run_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    client = AcceptingKinesis()
    monkeypatch.setattr("icestream.kinesis.clients.kinesis_client", lambda settings, **_: client)
    assert cli.main(["produce", "--backfill-hours", "0.5", "--count", "100", "--seed", "3", "--anomalies", "none",
                     "--no-progress"]) == 0  # fmt: skip
    assert len(client.data) == 100
    assert not tables_truth_path(run_settings).exists()


def test_the_options_are_refused_where_they_cannot_apply(
    run_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text('{"event_id": "a"}\n')
    assert cli.main(["produce", "--from-file", str(source), "--orders", "1"]) == 2
    assert "--from-file" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="order_rate"):
        backfill_config(order_rate=-1.0)

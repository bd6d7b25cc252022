"""A change stream's parse: the two shapes, the operations, each declared type, and every reject reason."""

from __future__ import annotations

import json

import pytest

from icestream.errors import ConfigError
from icestream.ingest.changes import CHANGE_REJECT_REASONS, DELETE, UPSERT, ChangeSpec, parse_change
from icestream.ingest.options import IngestOptions, ingest_options
from icestream.ingest.parse import Rejection

COLUMNS = "id bigint, name string, n int, score double, ok boolean, at timestamp, day date, version bigint"
FLAT = ChangeSpec.parse(COLUMNS, "id", "version")
DEBEZIUM = ChangeSpec.parse(COLUMNS, "id", "version", "debezium")


def parse(document: object, spec: ChangeSpec = FLAT) -> tuple | Rejection:
    return parse_change(json.dumps(document).encode(), spec, 10_000, "49:0")


def values(document: object, spec: ChangeSpec = FLAT) -> dict[str, str | None]:
    parsed = parse(document, spec)
    assert isinstance(parsed, tuple), parsed
    return parsed[5]


def test_a_flat_change_becomes_the_reader_fields_with_each_value_as_exact_cast_text() -> None:
    parsed = parse({"op": "u", "id": 7, "name": "Ada", "n": -3, "score": 2, "ok": False,
                    "at": "2026-11-26T05:00:00.5+01:00", "day": "2026-11-26", "version": 4, "extra": [1]})  # fmt: skip
    cast_text = {"id": "7", "name": "Ada", "n": "-3", "score": "2.0", "ok": "false"}
    cast_text |= {"at": "2026-11-26T04:00:00.500000Z", "day": "2026-11-26", "version": "4"}
    assert parsed == ("49:0", None, None, UPSERT, None, cast_text, None, None, False)


@pytest.mark.parametrize(
    ("op", "operation"),
    [("c", UPSERT), ("CREATE", UPSERT), ("insert", UPSERT), ("r", UPSERT), ("snapshot", UPSERT),
     ("u", UPSERT), ("Update", UPSERT), ("upsert", UPSERT), ("d", DELETE), ("DELETE", DELETE)],
)  # fmt: skip
def test_operations_in_any_case(op: str, operation: str) -> None:
    assert parse({"op": op, "id": 1, "version": 1})[3] == operation


def test_missing_columns_are_null_and_epoch_numbers_are_debezium_times() -> None:
    assert values({"op": "c", "id": 1, "version": 1, "at": 86_400_000, "day": 1}) == {
        "id": "1", "name": None, "n": None, "score": None, "ok": None, "at": "1970-01-02T00:00:00.000000Z",
        "day": "1970-01-02", "version": "1",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("document", "reason", "detail"),
    [
        ({"id": 1, "version": 1}, "missing_op", "op is missing or null"),
        ({"op": "merge", "id": 1, "version": 1}, "unknown_op", None),
        ({"op": 5, "id": 1, "version": 1}, "unknown_op", None),
        ({"op": "u", "version": 1}, "missing_key", "id is missing or null"),
        ({"op": "u", "id": None, "version": 1}, "missing_key", "id is missing or null"),
        ({"op": "u", "id": 1}, "missing_order", "version is missing or null"),
        ({"op": "u", "id": "1", "version": 1}, "wrong_type", "id: a string where a bigint is declared"),
        ({"op": "u", "id": True, "version": 1}, "wrong_type", "id: a boolean where a bigint is declared"),
        ({"op": "u", "id": 1.0, "version": 1}, "wrong_type", "id: a number where a bigint is declared"),
        ({"op": "u", "id": 2**63, "version": 1}, "out_of_range", None),
        ({"op": "u", "id": 1, "version": 1, "n": 2**31}, "out_of_range", None),
        ({"op": "u", "id": 1, "version": 1, "name": 5}, "wrong_type", None),
        ({"op": "u", "id": 1, "version": 1, "ok": 1}, "wrong_type", None),
        ({"op": "u", "id": 1, "version": 1, "score": "1.5"}, "wrong_type", None),
        ({"op": "u", "id": 1, "version": 1, "at": "2026-11-26T05:00:00"}, "bad_timestamp", None),
        ({"op": "u", "id": 1, "version": 1, "at": 1.5}, "bad_timestamp", None),
        ({"op": "u", "id": 1, "version": 1, "day": "26.11.2026"}, "bad_date", None),
        ([1], "not_an_object", None),
    ],
)
def test_every_reject_reason(document: object, reason: str, detail: str | None) -> None:
    parsed = parse(document)
    assert isinstance(parsed, Rejection)
    assert parsed.reason == reason
    assert reason in CHANGE_REJECT_REASONS or reason == "not_an_object"
    if detail is not None:
        assert parsed.detail == detail


def test_bytes_that_are_no_json_object_are_rejected_as_events_are() -> None:
    for data, reason in ((b"", "empty_payload"), (b"{x", "invalid_json"), (b"\xff", "non_utf8")):
        assert parse_change(data, FLAT, 10_000, "1:0").reason == reason
    assert parse_change(b'{"op":"u"}' + b" " * 100, FLAT, 50, "1:0").reason == "oversized"


def test_debezium_takes_after_or_for_a_delete_before_and_fills_from_the_envelope() -> None:
    spec = ChangeSpec.parse("id bigint, name string, ts_ms bigint", "id", "ts_ms", "debezium")
    update = {"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "b"}, "op": "u", "ts_ms": 7,
              "source": {"lsn": 9}}  # fmt: skip
    assert values(update, spec) == {"id": "1", "name": "b", "ts_ms": "7"}
    delete = {"before": {"id": 1, "name": "b"}, "after": None, "op": "d", "ts_ms": 8}
    assert parse(delete, spec)[3] == DELETE
    assert values(delete, spec) == {"id": "1", "name": "b", "ts_ms": "8"}
    # The JSON converter with schemas on wraps the envelope in "payload".
    assert values({"schema": {"type": "struct"}, "payload": update}, spec) == {"id": "1", "name": "b", "ts_ms": "7"}
    # A column the row has wins over the envelope's field of the same name.
    assert values({**update, "after": {"id": 1, "ts_ms": 99}}, spec)["ts_ms"] == "99"
    assert parse({"before": None, "after": None, "op": "u", "ts_ms": 1}, spec).reason == "missing_row"
    assert parse({"op": "t", "ts_ms": 1}, DEBEZIUM).reason == "unknown_op"  # truncate is not a row change


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("id bigint", "id", None, "avro"), "changes format 'avro'"),
        (("id bigint, op string", "id", None, "flat", "op"), "also a declared column"),
    ],
)
def test_spec_errors_say_what_to_write(arguments: tuple, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ChangeSpec.parse(*arguments)


def test_a_change_stream_defaults_to_no_dedupe_and_refuses_event_only_options(settings) -> None:
    options = ingest_options(settings, changes=FLAT)
    assert (options.dedupe, options.routing) == (False, None)
    assert ingest_options(settings).dedupe is True
    for wrong in ({"dedupe": True}, {"schema_evolution": "add-columns"}, {"transform": lambda frame: frame}):
        with pytest.raises(ConfigError, match=next(iter(wrong))):
            IngestOptions(changes=FLAT, **{"dedupe": False, **wrong}).validated()
    with pytest.raises(ConfigError, match="routing"):
        ingest_options(settings, changes=FLAT, routing="event_type").validated()


def test_the_settings_declare_a_change_stream_or_none() -> None:
    from icestream.config import load_settings
    from icestream.ingest.changes import change_spec_from_settings

    assert change_spec_from_settings(load_settings()) is None
    spec = change_spec_from_settings(load_settings(changes_columns="id bigint, v bigint", changes_key="id",
                                                   changes_order="v", changes_format="debezium"))  # fmt: skip
    assert spec == ChangeSpec.parse("id bigint, v bigint", "id", "v", "debezium")
    with pytest.raises(ConfigError, match="changes_key needs changes_columns"):
        change_spec_from_settings(load_settings(changes_key="id"))

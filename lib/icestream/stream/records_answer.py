"""The emulator's GetRecords answer, written directly instead of through moto's model walk.

moto 5.2.5 turns an answer into JSON by walking the operation's output shape for every value of
every record (decoding each record's stored base64 ``Data`` to bytes, then encoding it again, and
parsing each arrival time into an aware datetime): measured 2026-11-27 with py-spy during a
GetRecords loop, 3.6 of the emulator's 4.3 busy seconds were that walk, about 38 µs of emulator
CPU per record served. The emulator shares the machine's cores with the reader it serves, so
its cost is every reader's. Here the answer is written with the same values, the same member
order and the same JSON encoding (``tests/unit/stream/test_records_answer.py`` compares the bytes
with moto's own answer); everything else, and every error, is still moto's.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
from typing import Any

JSON_CONTENT_TYPE = "application/x-amz-json-1.1"  # what moto's serializer sends for Kinesis (protocol "json")


def arrival_time(created: Any) -> int | float:
    """A record's ``ApproximateArrivalTimestamp`` as the answer carries it: epoch seconds, cut to the
    millisecond (an integer when the time has no fraction), as moto's serializer writes it.

    Args:
        created: The record's naive UTC arrival time (moto's ``Record.created_at_datetime``).
    """
    seconds = calendar.timegm(created.timetuple())
    return seconds + (created.microsecond // 1000) / 1000.0 if created.microsecond else seconds


def canonical_base64(data: str) -> str:
    """``data`` as Kinesis answers it: moto decodes what a put stored and encodes it again, so
    base64 that was not canonical (line breaks, no padding) comes back canonical. Canonical
    input, what every SDK sends, is returned as it is, without the round trip."""
    try:
        if base64.b64encode(base64.b64decode(data, validate=True)).decode("ascii") == data:
            return data
    except binascii.Error:
        pass
    return base64.b64encode(base64.b64decode(data)).decode("ascii")


def records_answer(next_iterator: str | None, records: list[Any], millis_behind: int | None) -> str:
    """The JSON body of a GetRecords answer: the members moto answers with, in the model's order,
    and a member that is ``None`` left out, as moto's serializer does.

    Args:
        next_iterator: The next shard iterator (``None`` once a closed shard is read to its end).
        records: moto ``Record`` objects.
        millis_behind: ``MillisBehindLatest``.
    """
    answer: dict[str, Any] = {
        "Records": [
            {
                "SequenceNumber": str(record.sequence_number),
                "ApproximateArrivalTimestamp": arrival_time(record.created_at_datetime),
                "Data": canonical_base64(record.data),
                "PartitionKey": record.partition_key,
            }
            for record in records
        ]
    }
    if next_iterator is not None:
        answer["NextShardIterator"] = next_iterator
    if millis_behind is not None:
        answer["MillisBehindLatest"] = millis_behind
    return json.dumps(answer)


def direct_records_answer(responses: Any) -> None:
    """Replace ``KinesisResponse.get_records`` (moto's ``moto.kinesis.responses``) with one that
    writes its answer with :func:`records_answer`. The backend's errors (an expired or unknown
    iterator, a missing stream) are raised before any answer is written, and moto turns them
    into its error answers as before. moto's own method stays as ``KinesisResponse.moto_get_records``
    (the tests compare the two answers)."""

    def get_records(self: Any) -> tuple[str, dict[str, str]]:
        next_iterator, records, behind = self.kinesis_backend.get_records(
            self._get_param("StreamARN"), self._get_param("ShardIterator"), self._get_param("Limit")
        )
        return records_answer(next_iterator, records, behind), {"Content-Type": JSON_CONTENT_TYPE}

    if not hasattr(responses.KinesisResponse, "moto_get_records"):
        responses.KinesisResponse.moto_get_records = responses.KinesisResponse.get_records
    responses.KinesisResponse.get_records = get_records

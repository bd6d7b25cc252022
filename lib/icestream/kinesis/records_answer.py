"""The emulator's GetRecords answer, written directly instead of through moto's model walk.

moto 5.2.5 turns an answer into JSON by walking the operation's output shape for every value of
every record (decoding each record's stored base64 ``Data`` to bytes, then encoding it again, and
parsing each arrival time into an aware datetime): measured 2026-11-27 with py-spy during a
GetRecords loop, 3.6 of the emulator's 4.3 busy seconds were that walk, about 38 µs of emulator
CPU per record served. The emulator shares the machine's cores with the reader it serves, so
its cost is every reader's. Here the answer is written with the same values, the same member
order and the same JSON encoding (``tests/unit/kinesis/test_records_answer.py`` compares the bytes
with moto's own answer); everything else, and every error, is still moto's. Serving a drain of
about 40,800 records cost the emulator 1.55 CPU-seconds before and 0.32 after, with moto's
request-id scan of JSON bodies skipped as well (``bench/bench_pipeline.py``, 2026-11-27).
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta
from json.encoder import encode_basestring_ascii
from typing import Any

JSON_CONTENT_TYPE = "application/x-amz-json-1.1"  # what moto's serializer sends for Kinesis (protocol "json")


_EPOCH = datetime(1970, 1, 1)  # moto's arrival times are naive UTC
_SECOND = timedelta(seconds=1)
# One record of the answer as json.dumps writes it (its separators, member order and number forms):
# the sequence number is digits and the data base64, neither of which JSON escapes.
_RECORD = '{"SequenceNumber": "%s", "ApproximateArrivalTimestamp": %r, "Data": "%s", "PartitionKey": %s}'


def arrival_time(created: datetime) -> int | float:
    """A record's ``ApproximateArrivalTimestamp`` as the answer carries it: epoch seconds, cut to the
    millisecond (an integer when the time has no fraction), as moto's serializer writes it.

    Args:
        created: The record's naive UTC arrival time (moto's ``Record.created_at_datetime``).
    """
    seconds = (created - _EPOCH) // _SECOND  # exact: timedelta arithmetic is in whole microseconds
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
    a member that is ``None`` left out, and the text ``json.dumps`` writes for them, as moto's
    serializer does.

    Args:
        next_iterator: The next shard iterator (``None`` once a closed shard is read to its end).
        records: moto ``Record`` objects.
        millis_behind: ``MillisBehindLatest``.
    """
    written = ", ".join(
        [
            _RECORD
            % (
                record.sequence_number,
                arrival_time(record.created_at_datetime),
                canonical_base64(record.data),
                encode_basestring_ascii(record.partition_key),
            )
            for record in records
        ]
    )
    members = [f'"Records": [{written}]']
    if next_iterator is not None:
        members.append(f'"NextShardIterator": {encode_basestring_ascii(next_iterator)}')
    if millis_behind is not None:
        members.append(f'"MillisBehindLatest": {int(millis_behind)!r}')
    return "{" + ", ".join(members) + "}"


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
    enrich = responses.KinesisResponse._enrich_response  # a staticmethod: a plain function here

    def enrich_without_scanning(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
        # moto writes its request id into an XML body with a regular expression whose look-behind
        # scans every position of the body: about 7 ms per megabyte, a quarter of the emulator's
        # time serving records written directly. A JSON body holds no <RequestId> element (base64
        # has no "<"); the headers still get their request id.
        if isinstance(body, str) and "<RequestId>" not in body:
            return enrich(headers, "")[0], body
        return enrich(headers, body)

    responses.KinesisResponse._enrich_response = staticmethod(enrich_without_scanning)

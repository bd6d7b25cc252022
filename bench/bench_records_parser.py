"""What turning a GetRecords answer into Python values costs per record: botocore's parser against the
one icestream's clients use (``icestream.kinesis.records_parser``).

One answer of ``--records`` records (generated 270-byte payloads, base64 in JSON, as Kinesis sends
them) is parsed by botocore's own JSON parser (with icestream's cheaper timestamp parser, as before)
and by :class:`~icestream.kinesis.records_parser.RecordsJSONParser`, alternating, ``--runs`` times each;
the CPU time of each parse is divided by the records. The two results are checked to be equal.

Run: ``.venv/bin/python bench/bench_records_parser.py`` (10,000 records, 9 runs: a few seconds).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from botocore.parsers import JSONParser
from common import banner, command_line, shown, summary, write_results

from icestream.kinesis.clients import _botocore_session, utc_timestamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()

    facts = banner("a GetRecords answer parsed: botocore's parser against icestream's", command_line())
    session = _botocore_session()
    shape = session.get_service_model("kinesis").operation_model("GetRecords").output_shape
    rng = random.Random(7)  # noqa: S311 - payload bytes, not secrets
    records = [
        {"SequenceNumber": f"4963{number:052d}", "ApproximateArrivalTimestamp": 1_764_000_000 + number / 1000,
         "Data": base64.b64encode(rng.randbytes(270)).decode(), "PartitionKey": f"user-{number % 1000}"}
        for number in range(args.records)
    ]  # fmt: skip
    body = json.dumps({"Records": records, "NextShardIterator": "i" * 200, "MillisBehindLatest": 0}).encode()
    answer = {"body": body, "headers": {"x-amzn-requestid": "r"}, "status_code": 200}
    parsers: dict[str, Any] = {
        "botocore": JSONParser(timestamp_parser=utc_timestamp),
        "icestream": session.get_component("response_parser_factory").create_parser("json"),
    }
    if parsers["botocore"].parse(answer, shape) != parsers["icestream"].parse(answer, shape):
        raise SystemExit("the two parsers disagree")
    micros: dict[str, list[float]] = {name: [] for name in parsers}
    for number in range(args.runs):
        for name in parsers if number % 2 == 0 else list(reversed(parsers)):
            began = time.process_time()
            parsers[name].parse(answer, shape)
            micros[name].append((time.process_time() - began) / args.records * 1e6)
    result = {"machine": facts, "command": command_line(), "records": args.records,
              "us_per_record": {name: summary(values) for name, values in micros.items()},
              "ratio_icestream_to_botocore": summary([a / b for a, b in zip(micros["icestream"], micros["botocore"],
                                                                           strict=True)])}  # fmt: skip
    for name in parsers:
        print(f"{name:10s} {shown(result['us_per_record'][name], ' µs per record')}")
    print(f"icestream / botocore: {shown(result['ratio_icestream_to_botocore'])}")
    write_results("records_parser", result)


if __name__ == "__main__":
    main()

"""A malformed payload as notebook 01 shows it: whole, with the ingest's verdict and a mark where it breaks."""

from __future__ import annotations

import pytest

from icestream.demos.malformed_showcase import BREAK_MARK, show_malformed
from icestream.synthetic.malformed import malformed_payload


@pytest.mark.parametrize(
    ("kind", "before_mark"),
    [
        ("invalid_json", "{"),
        ("wrong_type_string", '"user_id":48213'),
        ("bad_timestamp", '"event_ts":"2026-13-45'),
        ("non_utf8", "\\xe9"),
    ],
)
def test_a_malformed_payload_is_shown_whole_with_its_break_marked(kind: str, before_mark: str) -> None:
    verdict, text = show_malformed(malformed_payload(kind))
    assert verdict.split(":")[0] != "accepted"
    assert text.count(BREAK_MARK) == 1
    assert text.split(BREAK_MARK)[1].startswith(before_mark) or text.split(BREAK_MARK)[0].endswith(before_mark)
    assert text.replace(BREAK_MARK, "").endswith("}"), "nothing cut off"


def test_an_oversized_payload_keeps_everything_but_its_padding() -> None:
    verdict, text = show_malformed(malformed_payload("oversized"))
    assert verdict.startswith("oversized:")
    assert len(text) < 400
    assert "more 'x')" in text
    assert text.endswith("}}")

"""Offsets of the live source: where a query starts, how far a trigger goes, partitions."""

from __future__ import annotations

from stanpkg.pipeline.live_client import ChannelBounds
from stanpkg.pipeline.live_offsets import (
    SequenceRange,
    advance,
    ending_offsets,
    pack_ranges,
    split_ranges,
    starting_offsets,
)

BOUNDS = {"a": ChannelBounds(8, 12), "b": ChannelBounds(1, 3), "empty": ChannelBounds(0, 0)}


def test_starting_offsets() -> None:
    assert starting_offsets("earliest", BOUNDS) == {"a": 7, "b": 0, "empty": 0}
    assert starting_offsets("latest", BOUNDS) == {"a": 12, "b": 3, "empty": 0}
    # Channels the JSON leaves out start at their earliest; named ones may not exist yet.
    assert starting_offsets({"a": 2, "later": 5}, BOUNDS) == {
        "a": 2,
        "b": 0,
        "empty": 0,
        "later": 5,
    }


def test_ending_offsets_never_past_the_last_sequence() -> None:
    assert ending_offsets("latest", BOUNDS) == {"a": 12, "b": 3, "empty": 0}
    assert ending_offsets({"a": 10, "b": 99}, BOUNDS) == {"a": 10, "b": 3, "empty": 0}


def test_advance_reads_everything_new_and_new_channels_join_at_earliest() -> None:
    start = {"a": 9, "b": 3, "gone": 4}
    assert advance(start, BOUNDS) == {"a": 12, "b": 3, "gone": 4, "empty": 0}


def test_advance_shares_max_messages_by_backlog() -> None:
    bounds = {"big": ChannelBounds(1, 100), "small": ChannelBounds(1, 10)}
    end = advance({"big": 0, "small": 0}, bounds, max_messages=11)
    assert end == {"big": 10, "small": 1}
    end = advance({"big": 0, "small": 0}, bounds, max_messages=3)
    assert sum(end.values()) == 3 and end["big"] >= end["small"]
    assert advance({"big": 99, "small": 10}, bounds, max_messages=1) == {"big": 100, "small": 10}


def test_advance_stops_at_the_available_now_target() -> None:
    target = {"a": 10}
    assert advance({"a": 7}, BOUNDS, target=target) == {"a": 10}  # b joins no more
    assert advance({"a": 10}, BOUNDS, target=target) == {"a": 10}


def test_split_ranges_by_channel_and_size() -> None:
    ranges = split_ranges({"a": 0, "b": 5, "c": 3}, {"a": 5, "b": 5, "c": 4, "new": 9}, 2)
    assert ranges == [
        SequenceRange("a", 0, 2),
        SequenceRange("a", 2, 4),
        SequenceRange("a", 4, 5),
        SequenceRange("c", 3, 4),
    ]


def test_pack_ranges_groups_small_channels_up_to_the_partition_size() -> None:
    ranges = [
        SequenceRange("a", 0, 40),
        SequenceRange("b", 0, 30),
        SequenceRange("c", 10, 40),
        SequenceRange("d", 0, 100),
        SequenceRange("e", 0, 1),
    ]
    assert pack_ranges(ranges, 100) == [
        (ranges[0], ranges[1], ranges[2]),  # 100 messages
        (ranges[3],),  # a full partition alone
        (ranges[4],),
    ]
    assert pack_ranges([], 100) == []
    assert pack_ranges(ranges[:2], 10) == [(ranges[0],), (ranges[1],)]

"""RecentGuids: the publish IDs a clustered channel stored within the duplicate window,
kept by runs of one timestamp (a publish batch is one run)."""

from __future__ import annotations

from stanpkg.stores.jetstream.replicated_messages import RecentGuids

SECOND = 1_000_000_000


def test_ids_are_kept_for_the_window_by_their_timestamps() -> None:
    recent = RecentGuids(2.0)
    recent.add_stamped(["a", "b"], [1 * SECOND, 1 * SECOND])
    recent.add_stamped(["c"], [2 * SECOND])
    assert all(guid in recent for guid in "abc")
    recent.add_stamped(["d"], [3 * SECOND])  # a and b are 2 s old: the window's edge
    assert all(guid in recent for guid in "abcd")
    recent.add_stamped(["e"], [3 * SECOND + 1])
    assert "a" not in recent and "b" not in recent
    assert all(guid in recent for guid in "cde")


def test_a_run_of_several_timestamps_is_pruned_by_each() -> None:
    recent = RecentGuids(1.0)
    # As a promotion restores a channel: a stamp per message.
    recent.add_stamped(["a", "b", "c", "d"], [1 * SECOND, 1 * SECOND, 2 * SECOND, 3 * SECOND])
    assert "a" not in recent and "b" not in recent  # older than 3 s - 1 s
    assert "c" in recent and "d" in recent


def test_empty_ids_are_not_kept() -> None:
    recent = RecentGuids(1.0)
    recent.add_stamped(["", "x", ""], [SECOND] * 3)
    recent.add_stamped([], [])
    assert "" not in recent and "x" in recent


def test_runs_of_one_timestamp_merge_and_the_window_moves_through_many() -> None:
    """As with many channels: runs of one or two IDs, thousands of them, kept flat."""
    recent = RecentGuids(1.0)
    for n in range(10_000):
        stamp = n * SECOND // 1000  # 1 ms apart: the last 1,001 stamps are in the window
        recent.add_stamped([f"g{n}", ""], [stamp, stamp])
        recent.add_stamped([f"h{n}"], [stamp])  # the same timestamp: merged into that run
    assert len(recent) == 2 * 1001
    assert "g8998" not in recent and "h8998" not in recent
    assert all(f"{kind}{n}" in recent for kind in "gh" for n in range(8999, 10_000))

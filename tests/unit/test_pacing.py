"""The per-channel token bucket that paces posts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.slack.pacing import ChannelPacing, Pace

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def test_a_burst_goes_at_once_then_posts_are_booked_one_interval_apart() -> None:
    """Three posts go now; the next ones get slots one second apart, in order."""
    pacing = ChannelPacing(Pace(every=SECOND, burst=3))
    slots = [pacing.slot("C1", f"n{i}", T0) for i in range(6)]
    assert slots == [None, None, None, T0 + SECOND, T0 + 2 * SECOND, T0 + 3 * SECOND]


def test_a_booked_post_goes_at_its_slot_and_not_before() -> None:
    """A waiting post keeps its slot: asked again early it waits, at its slot it goes."""
    pacing = ChannelPacing(Pace(every=SECOND, burst=1))
    assert pacing.slot("C1", "first", T0) is None
    assert pacing.slot("C1", "second", T0) == T0 + SECOND
    assert pacing.slot("C1", "second", T0 + SECOND / 2) == T0 + SECOND
    assert pacing.slot("C1", "second", T0 + SECOND) is None
    assert pacing.slot("C1", "third", T0 + SECOND) == T0 + 2 * SECOND


def test_channels_are_paced_apart_and_an_idle_channel_refills() -> None:
    """A busy channel does not use another's slots; after a pause a channel bursts again."""
    pacing = ChannelPacing(Pace(every=SECOND, burst=2))
    assert [pacing.slot("busy", f"b{i}", T0) for i in range(3)] == [None, None, T0 + SECOND]
    assert pacing.slot("quiet", "q", T0) is None
    later = T0 + 10 * SECOND
    assert [pacing.slot("busy", f"c{i}", later) for i in range(2)] == [None, None]

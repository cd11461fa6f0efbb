"""The sandbox workspace saved to a file and loaded back is the same Slack."""

from __future__ import annotations

from pathlib import Path

from devkit.sandbox.saved import keep_saved, load_workspace


def test_a_loaded_workspace_has_the_saved_messages_edits_ephemerals_and_dms(
    tmp_path: Path,
) -> None:
    """Messages (with their edits and metadata), ephemerals, IMs and ids survive a reload."""
    path = tmp_path / "slack.json"
    first = load_workspace(path)
    stop = keep_saved(first, path)
    dana = first.add_user("dana", user_id="U_DANA")
    root = first.post_message("general", text="root", metadata={"event_type": "e"})
    card = first.post_message(
        "general",
        text="card",
        thread_ts=root.ts,
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}],
    )
    first.update_message(root.channel, card.ts, text="decided")
    first.post_ephemeral(root.channel, dana.id, text="only you")
    im = first.open_im(dana.id)
    stop()

    again = load_workspace(path)
    assert again.messages(root.channel) == first.messages(root.channel)
    assert again.thread(root.channel, root.ts) == first.thread(root.channel, root.ts)
    assert again.thread(root.channel, root.ts)[1].edits[0].text == "card"
    assert again.ephemerals() == first.ephemerals()
    assert again.open_im(dana.id) == im
    assert again.add_channel("new").id not in {c.id for c in first.channels()}
    later = again.post_message("general", text="later")
    assert float(later.ts) > float(card.ts)

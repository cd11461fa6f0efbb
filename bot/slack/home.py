"""The App Home tab: what waits on the person looking, their recent runs, their grants.

The tab is a view of the database published for one person (``views.publish``) through the
outbox: when they open it, after they decide from it, and, once they have opened it, after
every change that concerns them (``bot.slack.home_refreshes``). Its approvals are the cards
themselves (``budget_blocks.card_for``), so their buttons carry the same values, the arguments'
hash among them, and reach the same listeners as on a card.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent_runtime import Actor, Approval, ApprovalStore, Decision, Run, Store
from agent_runtime.approvals import Refusal, judge
from agent_runtime.grants import Grant
from agent_runtime.notices import Notice
from bot.slack.blocks import Block, context, plain, section
from bot.slack.budget_blocks import card_for
from bot.slack.grant_blocks import grant_message
from bot.slack.text import shown
from bot.slack.views import requester_fields, task_of
from bot.slack.waiting import count_waiting, waiting_on

HOME = "home.publish"
"""The notice kind that publishes a person's Home tab."""
APPROVALS_SHOWN = 8
"""Cards the tab shows (each is up to seven blocks; a view holds 100)."""
RUNS_SHOWN = 5
GRANTS_SHOWN = 5
FROM_HOME = "|home"
"""Appended to a modal's ``private_metadata`` when it was opened from the Home tab."""


def home_notice(actor: Actor, key: str, note: str = "") -> Notice:
    """Publish ``actor``'s Home tab as the database stands when sent, with ``note`` (mrkdwn,
    already escaped) on top; ``key`` makes it once per click or opening."""
    return Notice(
        key=f"home:{key}",
        run_id=None,
        kind=HOME,
        team_id=actor.team_id,
        enterprise_id=actor.enterprise_id,
        data={"user": actor.to_json(), "note": note},
    )


def from_home(body: dict[str, Any]) -> bool:
    """Tell whether a click came from the Home tab."""
    view = body.get("view")
    return isinstance(view, dict) and view.get("type") == "home"


def marked(modal: dict[str, Any]) -> dict[str, Any]:
    """``modal`` remembering that it was opened from the Home tab."""
    return modal | {"private_metadata": str(modal.get("private_metadata", "")) + FROM_HOME}


def unmarked(metadata: str) -> tuple[str, bool]:
    """A modal's ``private_metadata`` as it was made, and whether it came from the Home tab."""
    if metadata.endswith(FROM_HOME):
        return metadata.removesuffix(FROM_HOME), True
    return metadata, False


def home_for(
    approvals: ApprovalStore, runs: Store, actor: Actor, now: datetime, note: str = ""
) -> dict[str, Any]:
    """``actor``'s Home tab as the database stands at ``now``."""
    waiting = waiting_on(approvals, actor, limit=APPROVALS_SHOWN, oldest_first=True)
    more = count_waiting(approvals, actor) - len(waiting) if len(waiting) == APPROVALS_SHOWN else 0
    decidable = [
        a for a in waiting if not isinstance(judge(a, actor, Decision.APPROVE, now), Refusal)
    ]
    mine = runs.list_runs(input_fields=requester_fields(actor), limit=RUNS_SHOWN)
    grants = approvals.list_grants(active_at=now, granted_by=actor, limit=GRANTS_SHOWN)
    return home_view(decidable, more, mine, grants, note)


def home_view(
    waiting: Sequence[Approval],
    more: int,
    runs: Sequence[Run],
    grants: Sequence[Grant],
    note: str = "",
) -> dict[str, Any]:
    """The Home tab: ``waiting`` (oldest first) as cards, ``more`` not shown, the runs and
    the active grants."""
    blocks: list[Block] = [section(note)] if note else []
    blocks.append(_header("Waiting on you"))
    if not waiting:
        blocks.append(context("Nothing is waiting on you."))
    for approval in waiting:
        blocks += [{"type": "divider"}, *card_for(approval)[1]]
    if more > 0:
        blocks.append(context(f"…and {more} more — use `/agent pending`"))
    blocks += [_header("Your recent runs"), _runs(runs)]
    blocks.append(_header("Your grants"))
    if not grants:
        blocks.append(context("You have no grants in force."))
    for grant in grants:
        blocks += grant_message(grant)[1]
    return {"type": "home", "blocks": blocks}


def _header(text: str) -> Block:
    return {"type": "header", "text": plain(text)}


def _runs(runs: Sequence[Run]) -> Block:
    if not runs:
        return context("You have started no runs yet. Start one with `/agent &lt;task&gt;`.")
    return section("\n".join(f"`{r.id}` {r.status.value} · {shown(task_of(r), 80)}" for r in runs))

"""The kill points the chaos suite aims at, and the fault class each belongs to."""

from __future__ import annotations

import random
from dataclasses import dataclass

STORE_CALL = "SIGKILL at a store call"
JOURNAL_COMMIT = "SIGKILL around a journal commit"
TOOL = "SIGKILL around a tool execution"
DELIVERY = "SIGKILL around a Slack delivery"
DECISION_COMMIT = "SIGKILL during a decision's commit"
OTHER_COMMIT = "SIGKILL during another commit"
PG_RESTART = "PostgreSQL restart"
TERMINATE = "pg_terminate_backend (every connection)"
SLACK_DOWN = "Slack unreachable"
SLACK_429 = "Slack 429 with Retry-After"

KILL_CLASSES = (STORE_CALL, JOURNAL_COMMIT, TOOL, DELIVERY, DECISION_COMMIT, OTHER_COMMIT)
FAULT_CLASSES = (*KILL_CLASSES, PG_RESTART, TERMINATE, SLACK_DOWN, SLACK_429)

_SIDES = ("before", "after")
_STORE_METHODS = (
    "SqlStore.create_run",
    "SqlStore.claim_runs",
    "SqlStore.load_journal",
    "SqlStore.suspend",
    "SqlStore.complete",
    "SqlStore.deliver_event",
    "SqlApprovalStore.create_approval",
    "SqlApprovalStore.get_approval",
    "SqlApprovalStore.consume_approval",
    "SqlApprovalStore.decide_approval",
    "SqlOutbox.claim_due",
    "SqlOutbox.begin_send",
    "SqlOutbox.delivered",
    "SqlOutbox.delivery_of",
    "SqlReplayGuard.first_time",
)
_COMMITS = (
    "SqlStore.create_run",
    "SqlStore.append_step",
    "SqlStore.suspend",
    "SqlStore.complete",
    "SqlApprovalStore.create_approval",
    "SqlApprovalStore.consume_approval",
    "SqlOutbox.delivered",
)
_TOOLS = ("lookup_order", "issue_refund", "send_email")
_NOTICES = ("run.root", "run.reply", "approval.card", "approval.update", "run.root.update")

CATALOG: dict[str, tuple[str, ...]] = {
    STORE_CALL: tuple(f"store:{m}:{side}" for m in _STORE_METHODS for side in _SIDES),
    JOURNAL_COMMIT: tuple(f"store:SqlStore.append_step:{side}" for side in _SIDES),
    TOOL: tuple(f"tool:{t}:{side}" for t in _TOOLS for side in _SIDES),
    DELIVERY: tuple(f"slack:{n}:{side}" for n in _NOTICES for side in _SIDES),
    # decisions are judged and saved in batches (store.group_commit): the commit is
    # decide_approvals'
    DECISION_COMMIT: ("commit:SqlApprovalStore.decide_approvals",),
    OTHER_COMMIT: tuple(f"commit:{m}" for m in _COMMITS),
}
"""Every point aimed at, by fault class (all are reached by a demo run with its two clicks)."""


@dataclass(frozen=True)
class Aim:
    """One kill to arm: the point, its class, and at which arrival it fires."""

    point: str
    fault_class: str
    hit: int


def pick(rng: random.Random, turn: int) -> Aim:
    """The ``turn``-th aim: the kill classes in turn, a random point of the class and the
    arrival it fires at."""
    fault_class = KILL_CLASSES[turn % len(KILL_CLASSES)]
    point = rng.choice(CATALOG[fault_class])
    hit = 1 if fault_class == DECISION_COMMIT else rng.randint(1, 3)
    return Aim(point, fault_class, hit)


def class_of(point: str) -> str:
    """The fault class of a point that fired."""
    for fault_class, points in CATALOG.items():
        if point in points:
            return fault_class
    return STORE_CALL

"""Inspect and fork over in-memory stores: rebuilt model input, reused prefixes, live suffixes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
import responses

from agent_runtime import Decision, InvalidInput, NonDeterminismError, RunId, RunStatus, Tools
from agent_runtime.agent_loop import request_json
from agent_runtime.forking import agent_can_continue, fork_run, plan_fork
from agent_runtime.model_input import model_input, model_positions
from agent_runtime.models import (
    HttpOptions,
    Model,
    OpenAIChatModel,
    ScriptedModel,
    text_reply,
)
from agent_runtime.serialization import canonical_json
from tests.unit.agent_harness import DANA, LOOKUP, REFUND, AgentHarness

DONE = text_reply("refunded 49.99")


def _completed(h: AgentHarness) -> RunId:
    run_id = h.start()
    h.work()
    (approval,) = h.pending(run_id)
    assert h.approvals.decide(approval, DANA, Decision.APPROVE).accepted
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    return run_id


def _alternative(answer: str) -> tuple[ScriptedModel, dict[str, Model]]:
    model = ScriptedModel([text_reply(answer)], name="alt")
    return model, {"alt": model}


def test_inspect_rebuilds_each_model_input_byte_for_byte() -> None:
    """Inspect at every model step gives the exact bytes sent then, and calls nothing."""
    h = AgentHarness([LOOKUP, REFUND, DONE])
    run_id = _completed(h)
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    positions = model_positions(journal)
    assert len(positions) == 3
    calls, sent = dict(h.calls), h.model.calls
    for sent_request, position in zip(h.model.requests, positions, strict=True):
        seen = model_input(h.agent, h.approvals, run, journal, position)
        assert seen.identical
        assert seen.request_text == canonical_json(request_json(sent_request))
    assert (dict(h.calls), h.model.calls) == (calls, sent)
    last = model_input(h.agent, h.approvals, run, journal, positions[-1])
    assert [r["tool"] for r in last.tool_results] == ["lookup_order", "issue_refund"]
    assert last.used["model_calls"] == 2


def test_inspect_refuses_a_step_that_is_not_a_model_call() -> None:
    """Inspect names the model-call steps when asked about another kind of step."""
    h = AgentHarness([LOOKUP, DONE])
    run_id = h.start()
    h.work()
    journal = h.runtime.journal(run_id)
    tool_step = next(s.position for s in journal if s.name == "tool:lookup_order")
    with pytest.raises(InvalidInput, match="model calls are at steps: 1, 3"):
        model_input(h.agent, h.approvals, h.run(run_id), journal, tool_step)


def test_inspect_reports_an_agent_that_no_longer_rebuilds_the_run() -> None:
    """A changed system prompt makes the rebuilt input differ: inspect says it is not identical."""
    h = AgentHarness([LOOKUP, DONE])
    run_id = h.start()
    h.work()
    changed = replace(h.agent, system_prompt="be bold")
    journal = h.runtime.journal(run_id)
    first, second = model_positions(journal)
    with pytest.raises(NonDeterminismError):
        model_input(changed, h.approvals, h.run(run_id), journal, second)
    assert not model_input(changed, h.approvals, h.run(run_id), journal, first).identical


def test_fork_reuses_the_prefix_and_continues_live_under_another_model() -> None:
    """A fork at the last model call re-pays no model call and repeats no refund."""
    alt, models = _alternative("refund done, customer informed")
    h = AgentHarness([LOOKUP, REFUND, DONE], models=models.__getitem__)
    run_id = _completed(h)
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    at = model_positions(journal)[-1]
    fork = plan_fork(run, journal, at, agent_run=True, now=h.clock.now())
    forked = h.runtime.start(run.workflow, run.input | {"model": "alt"}, fork=fork)
    h.work()
    ended = h.run(forked.id)
    assert ended.status == RunStatus.COMPLETED, ended.error
    assert ended.output["answer"] == "refund done, customer informed"
    assert (ended.forked_from, ended.fork_at) == (run_id, at)
    assert h.calls == {"lookup_order": 1, "issue_refund": 1}
    assert (h.model.calls, alt.calls) == (3, 1)
    assert [r.id for r in h.runtime.forks(run_id)] == [forked.id]
    assert h.runtime.journal(forked.id)[:at] == journal[:at]


def test_fork_with_a_replaced_result_makes_no_model_call() -> None:
    """Replacing step K's result continues from it: the run ends with the given answer."""
    h = AgentHarness([LOOKUP, REFUND, DONE])
    run_id = _completed(h)
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    at = model_positions(journal)[-1]
    fork = plan_fork(
        run,
        journal,
        at,
        agent_run=True,
        replace_output=True,
        output=text_reply("I would not refund this").to_json(),
        now=h.clock.now(),
    )
    forked = h.runtime.start(run.workflow, run.input, fork=fork)
    h.work()
    assert h.run(forked.id).output["answer"] == "I would not refund this"
    assert h.model.calls == 3
    assert h.calls == {"lookup_order": 1, "issue_refund": 1}


def test_fork_at_the_refund_proposal_asks_for_a_new_approval() -> None:
    """A fork before a side effect re-proposes it under the fork's own, new approval."""
    alt = ScriptedModel([REFUND, DONE], name="alt")
    h = AgentHarness([LOOKUP, REFUND, DONE], models={"alt": alt}.__getitem__)
    run_id = _completed(h)
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    fork = plan_fork(run, journal, model_positions(journal)[1], agent_run=True, now=h.clock.now())
    forked = h.runtime.start(run.workflow, run.input | {"model": "alt"}, fork=fork).id
    h.work()
    assert h.run(forked).status == RunStatus.WAITING
    (approval,) = h.pending(forked)
    assert approval not in h.pending(run_id)
    assert h.calls == {"lookup_order": 1, "issue_refund": 1}
    assert h.approvals.decide(approval, DANA, Decision.APPROVE).accepted
    h.work()
    assert h.calls["issue_refund"] == 2
    assert h.keys[1].startswith(f"signoff-{forked}-")


@pytest.mark.parametrize("output", [{"message": {"role": "tool"}}, {"answer": 1}, "text"])
def test_fork_refuses_a_replacement_that_is_not_a_model_response(output: object) -> None:
    """A replacement output for a model step must be an assistant model response."""
    h = AgentHarness([LOOKUP, DONE])
    run_id = h.start()
    h.work()
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    with pytest.raises(InvalidInput, match="model response"):
        plan_fork(
            run,
            journal,
            model_positions(journal)[-1],
            agent_run=True,
            replace_output=True,
            output=output,
            now=h.clock.now(),
        )


def test_fork_only_at_model_calls_of_an_agent_run() -> None:
    """Forking an agent run inside a tool turn is refused with the valid points listed."""
    h = AgentHarness([LOOKUP, DONE])
    run_id = h.start()
    h.work()
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    with pytest.raises(InvalidInput, match="model calls: 1, 3"):
        plan_fork(run, journal, 2, agent_run=True, now=h.clock.now())


def test_fork_under_an_agent_that_cannot_continue_is_refused_before_writing() -> None:
    """An agent without the run's tools cannot continue its prefix: the fork is refused."""
    h = AgentHarness([LOOKUP, REFUND, DONE])
    run_id = _completed(h)
    journal = h.runtime.journal(run_id)
    toolless = replace(h.agent, tools=Tools())
    with pytest.raises(InvalidInput, match="agent t cannot continue run"):
        fork_run(
            h.runtime,
            run_id,
            model_positions(journal)[-1],
            agent_run=True,
            check=agent_can_continue(toolless, h.approvals),
        )
    assert h.runtime.forks(run_id) == []
    fork_run(
        h.runtime,
        run_id,
        model_positions(journal)[-1],
        agent_run=True,
        check=agent_can_continue(replace(h.agent, system_prompt="new"), h.approvals),
    )
    assert len(h.runtime.forks(run_id)) == 1, "another prompt may continue it"


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 8},
    }


def test_inspect_shows_the_exact_body_an_http_model_was_sent() -> None:
    """For an OpenAI-style model, inspect's wire body is byte for byte the POSTed body."""
    model = OpenAIChatModel(
        model="gpt-test", options=HttpOptions(base_url="http://llm.test/v1", api_key="k")
    )
    lookup = {
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "1042"}'},
            }
        ],
    }
    with responses.RequestsMock() as mock:
        url = "http://llm.test/v1/chat/completions"
        mock.post(url, json=_completion(lookup))
        mock.post(url, json=_completion({"content": "Order 1042: 49.99 USD"}))
        h = AgentHarness([], model=model)
        run_id = h.start()
        h.work()
        sent = [call.request.body for call in mock.calls]
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    for body, position in zip(sent, model_positions(journal), strict=True):
        seen = model_input(h.agent, h.approvals, run, journal, position)
        assert seen.identical
        assert seen.wire is not None
        assert json.dumps(seen.wire).encode() == body

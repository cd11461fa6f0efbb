"""The composition root: agents named by SIGNOFF_AGENT, and the groups their approvals use."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from agent_runtime import (
    Actor,
    Agent,
    AgentInput,
    ApprovalPolicy,
    ApprovalStatus,
    Decision,
    RunStatus,
    Tools,
    WorkerOptions,
    tool,
)
from agent_runtime.models import ModelRequest, ModelResponse, ScriptedModel, ToolCall
from agent_runtime.models.scripted import text_reply, tool_reply
from bot.app.assembly import load_agents
from bot.app.settings import Settings, SettingsError
from bot.app.wiring import Services, build_services
from tests.integration import run_cli, signoff_env

DANA = Actor(user_id="U_DANA")


def _pay(amount_cents: int, idempotency_key: str) -> str:
    """Pay a supplier."""
    return f"paid {amount_cents}"


def _answer(request: ModelRequest) -> ModelResponse:
    if any(m.role == "tool" for m in request.messages):
        return text_reply("done")
    return tool_reply(ToolCall(id="c1", name="pay", arguments={"amount_cents": 100}))


def _finance(members: tuple[str, ...]) -> Agent:
    pay = tool(side_effect=True, approval=ApprovalPolicy(groups=("finance",)), name="pay")(_pay)
    return Agent(
        name="payer",
        model=ScriptedModel(_answer),
        system_prompt="pay",
        tools=Tools(pay),
        approver_groups={"finance": members},
    )


def finance_agent() -> Agent:
    """The payer agent while Dana is in finance."""
    return _finance(("U_DANA",))


def reorganised_agent() -> Agent:
    """The payer agent once finance is Omar alone."""
    return _finance(("U_OMAR",))


def _services(url: str, agent: str) -> Services:
    return build_services(Settings(database_url=url, agent=f"{__name__}:{agent}"))


def test_an_agents_own_groups_decide_whether_its_approvals_are_stale(sqlite_url: str) -> None:
    """Moving a person out of the agent's approver group makes the pending approval stale."""
    before = _services(sqlite_url, "finance_agent")
    data = AgentInput(task="pay the supplier", requester=Actor(user_id="U_REQ")).to_json()
    run_id = before.runtime.start("agent:payer", data).id
    before.runtime.worker(WorkerOptions(owner="w", lease_ttl=timedelta(minutes=1))).run_once()
    assert before.runtime.get(run_id).status == RunStatus.WAITING
    (pending,) = before.approvals.store.list_approvals(run_id=run_id, status=ApprovalStatus.PENDING)
    after = _services(sqlite_url, "reorganised_agent")
    result = after.approvals.decide(pending.id, DANA, Decision.APPROVE)
    assert not result.accepted
    assert result.refused_as == "stale"


def test_an_agent_spec_without_attribute_is_refused_clearly(sqlite_url: str) -> None:
    """SIGNOFF_AGENT=module (no :attribute) says the spec needs an attribute naming the agent."""
    with pytest.raises(SettingsError, match=r"must be module:attribute.*'mypkg.agents:support'"):
        load_agents(Settings(database_url=sqlite_url, agent=__name__))


def test_a_missing_agent_attribute_is_named(sqlite_url: str) -> None:
    """SIGNOFF_AGENT=module:missing names the attribute the module lacks."""
    with pytest.raises(SettingsError, match="has no attribute 'missing'"):
        load_agents(Settings(database_url=sqlite_url, agent=f"{__name__}:missing"))


def test_an_agent_module_that_fails_to_load_is_one_line_naming_its_line(tmp_path: Path) -> None:
    """An agent module whose tool is misdefined exits 2 with one line naming the error and the
    module's line that raised it, no traceback."""
    (tmp_path / "broken_agent.py").write_text(
        "from agent_runtime import Agent, tool\n\n\n"
        "@tool(side_effect=True)\ndef refund(order_id, amount_cents):\n    return 'ok'\n"
    )
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}", extra={"SIGNOFF_AGENT": "broken_agent:support"}
    )
    done = run_cli(env, "worker", "--until-idle", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "signoff: error: SIGNOFF_AGENT: importing 'broken_agent' failed: TypeError: tool refund: "
        f"parameter 'order_id' needs a type hint ({tmp_path / 'broken_agent.py'}, line 4)"
    ]


def test_a_worker_refuses_to_start_with_a_tool_schema_that_is_not_json_schema(
    tmp_path: Path,
) -> None:
    """A hand-written tool whose parameters are not a JSON Schema stops ``signoff worker`` at
    start with exit 2 and one line naming the agent and the tool, before any run is taken."""
    (tmp_path / "schema_agent.py").write_text(
        "from agent_runtime import Agent, Tool, Tools\n"
        "from agent_runtime.models import ScriptedModel\n\n"
        "lookup = Tool(name='lookup', description='Look up.', fn=lambda q: q,\n"
        "              parameters={'type': 'object', 'properties': {'q': {'type': 'text'}}})\n"
        "support = Agent(name='support', model=ScriptedModel([]), system_prompt='x',\n"
        "                tools=Tools(lookup))\n"
    )
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}", extra={"SIGNOFF_AGENT": "schema_agent:support"}
    )
    done = run_cli(env, "worker", "--until-idle", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "signoff: error: tool parameters that are not a JSON Schema: support.lookup: "
    )


def test_an_agent_factory_that_raises_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function SIGNOFF_AGENT names that raises is a settings error naming the error and the
    factory's line."""
    (tmp_path / "factory_agent.py").write_text(
        "def support():\n    raise ValueError('no model configured')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 's.db'}", agent="factory_agent:support"
    )
    with pytest.raises(SettingsError) as raised:
        load_agents(settings)
    assert str(raised.value) == (
        "SIGNOFF_AGENT: calling 'factory_agent:support' failed: ValueError: no model configured "
        f"({tmp_path / 'factory_agent.py'}, line 2)"
    )


def test_a_workflow_module_in_the_current_directory_is_found(tmp_path: Path) -> None:
    """``SIGNOFF_WORKFLOWS`` names a module beside the user, with no PYTHONPATH set up."""
    (tmp_path / "local_flows.py").write_text(
        "from agent_runtime import Workflows\n\nworkflows = Workflows()\n\n\n"
        "@workflows.register('local.hello')\ndef hello(ctx, data):\n    return 'hi'\n"
    )
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}", extra={"SIGNOFF_WORKFLOWS": "local_flows:workflows"}
    )
    done = run_cli(env, "start", "local.hello", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip()) == 32

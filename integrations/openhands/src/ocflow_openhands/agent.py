"""The orchestrator agent preset (seeds 001 and 002: an agent inside OpenHands that turns a task
into a flow and drives it): the SDK's `Agent` with the ocflow tools, the file editor and the
terminal, a system prompt that plans through ocflow, and ocflow's review gate mapped onto
OpenHands' confirmation mode: `ocflow_apply` waits for the user's confirmation, nothing else
does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openhands.sdk import LLM, Agent, AgentContext, Conversation
from openhands.sdk.event import ActionEvent
from openhands.sdk.security import ConfirmRisky, SecurityRisk
from openhands.sdk.security.analyzer import SecurityAnalyzerBase
from openhands.sdk.tool import Tool
from openhands.tools.file_editor import FileEditorTool
from openhands.tools.terminal import TerminalTool

from ocflow_openhands.tool import OcflowApplyTool, OcflowToolSet

ORCHESTRATOR_SYSTEM_PROMPT = """\
You are the ocflow orchestrator, a coding agent inside OpenHands. You do a user's coding task
by planning it into a flow with ocflow and driving that flow, not by editing files one by one.

How you work:
1. Understand the task. Look at the repository first when the task is unclear (the terminal
   and the file editor are for reading; keep your own edits for small fixes the user asks for).
2. Call ocflow_run with the whole task, precise: the files, functions and behaviour involved,
   and how to check the result (which tests to run). ocflow plans the steps, runs each in its
   own directory, retries and recovers from failures, and keeps the changes aside.
3. Follow the flow: the answer lists every step as it started and finished. While `running`
   is true, call ocflow_status (it waits for the next change) until the flow ends.
4. When the flow failed, read why (the failed step's message, the summary); run it again with
   a better task, or tell the user what stands in the way.
5. When it succeeded, call ocflow_diff and review the changes: do they do the task, and only
   the task? Tell the user, in a few lines, what will change.
6. Call ocflow_apply to write the changes into the repository. The user is asked to confirm
   it; if they reject it, nothing is written: say so and ask what they want instead.
7. Finish with a short account: what changed, which files, what was checked.

A flow that ends with exit code 3 is not failed, and nothing is lost:
- state `waiting`: it asks a person something (its plan, a risky command, its apply). Tell the
  user what it asks, then ocflow_approve (it goes on) or ocflow_reject with their reason.
- state `paused`: a budget stopped it. Tell the user what it spent; with their agreement,
  ocflow_resume with a higher budget continues it where it stopped.
A flow started in another conversation is followed by its task_id with ocflow_status.

Never print, echo or write an API key; ocflow receives its key from the tool itself."""


class OcflowReviewGate(SecurityAnalyzerBase):
    """ocflow's review gate as a security analyzer: applying a flow's changes is the one
    action that writes into the user's repository, so it is HIGH risk and, with
    `review_gate_policy()`, waits for the user's confirmation; every other action is LOW."""

    def security_risk(self, action: ActionEvent) -> SecurityRisk:
        if action.tool_name == OcflowApplyTool.name:
            return SecurityRisk.HIGH
        return SecurityRisk.LOW


def review_gate_policy() -> ConfirmRisky:
    """Confirm HIGH risk actions only (with `OcflowReviewGate`, only `ocflow_apply`)."""
    return ConfirmRisky(threshold=SecurityRisk.HIGH, confirm_unknown=False)


def get_orchestrator_agent(
    llm: LLM,
    *,
    ocflow_bin: str | None = None,
    repo: str | None = None,
    ocflow_base_url: str | None = None,
    ocflow_model: str | None = None,
    use_agent_llm: bool = True,
    **agent_kwargs: Any,
) -> Agent:
    """The orchestrator: `llm` decides, ocflow plans and runs (with the same LLM unless
    `ocflow_base_url` / `ocflow_model` say otherwise). Pass the result to
    `start_orchestrator_conversation` to turn the review gate on."""
    ocflow_params: dict[str, Any] = {"use_agent_llm": use_agent_llm}
    for name, value in (
        ("ocflow_bin", ocflow_bin),
        ("repo", repo),
        ("base_url", ocflow_base_url),
        ("model", ocflow_model),
    ):
        if value is not None:
            ocflow_params[name] = value
    tools = [
        Tool(name=OcflowToolSet.name, params=ocflow_params),
        Tool(name=FileEditorTool.name),
        Tool(name=TerminalTool.name),
    ]
    # OpenHands' own system prompt stays (its field documentation warns against replacing it):
    # the orchestrator's instructions are added after it.
    context = agent_kwargs.pop("agent_context", None) or AgentContext()
    suffix = "\n\n".join(
        p for p in (context.system_message_suffix, ORCHESTRATOR_SYSTEM_PROMPT) if p
    )
    context = context.model_copy(update={"system_message_suffix": suffix})
    return Agent(llm=llm, tools=tools, agent_context=context, **agent_kwargs)


def start_orchestrator_conversation(
    agent: Agent, workspace: str | Path, **conversation_kwargs: Any
) -> Any:
    """A local conversation for the orchestrator with the review gate on: `run()` stops with
    the status WAITING_FOR_CONFIRMATION when the agent wants to apply; `run()` again confirms,
    `reject_pending_actions(reason)` rejects (nothing is written)."""
    conversation = Conversation(agent=agent, workspace=str(workspace), **conversation_kwargs)
    enable_review_gate(conversation)
    return conversation


def enable_review_gate(conversation: Any) -> None:
    """Map ocflow's review gate onto an existing conversation's confirmation mode."""
    conversation.set_security_analyzer(OcflowReviewGate())
    conversation.set_confirmation_policy(review_gate_policy())

"""ocflow inside OpenHands: the ocflow tools (`ocflow_run`, `ocflow_status`, `ocflow_diff`,
`ocflow_apply`, registered together as the tool set `ocflow`) and the orchestrator agent preset
with ocflow's review gate as OpenHands' confirmation mode."""

from ocflow_openhands.agent import (
    ORCHESTRATOR_SYSTEM_PROMPT,
    OcflowReviewGate,
    enable_review_gate,
    get_orchestrator_agent,
    review_gate_policy,
    start_orchestrator_conversation,
)
from ocflow_openhands.tool import (
    OcflowApplyAction,
    OcflowApplyObservation,
    OcflowDiffAction,
    OcflowDiffObservation,
    OcflowRunAction,
    OcflowRunObservation,
    OcflowStatusAction,
    OcflowStatusObservation,
    OcflowToolSet,
)

__all__ = [
    "ORCHESTRATOR_SYSTEM_PROMPT",
    "OcflowApplyAction",
    "OcflowApplyObservation",
    "OcflowDiffAction",
    "OcflowDiffObservation",
    "OcflowReviewGate",
    "OcflowRunAction",
    "OcflowRunObservation",
    "OcflowStatusAction",
    "OcflowStatusObservation",
    "OcflowToolSet",
    "enable_review_gate",
    "get_orchestrator_agent",
    "review_gate_policy",
    "start_orchestrator_conversation",
]

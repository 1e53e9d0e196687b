"""ocflow inside OpenHands: the ocflow tools (`ocflow_run`, `ocflow_status`, `ocflow_diff`,
`ocflow_apply`, `ocflow_resume`, `ocflow_approve`, `ocflow_reject`, registered together as the
tool set `ocflow`) and the orchestrator agent preset
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
    OcflowApproveAction,
    OcflowApproveObservation,
    OcflowDiffAction,
    OcflowDiffObservation,
    OcflowRejectAction,
    OcflowRejectObservation,
    OcflowResumeAction,
    OcflowResumeObservation,
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
    "OcflowApproveAction",
    "OcflowApproveObservation",
    "OcflowDiffAction",
    "OcflowDiffObservation",
    "OcflowRejectAction",
    "OcflowRejectObservation",
    "OcflowResumeAction",
    "OcflowResumeObservation",
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

//! Approvals: what a person must answer before a flow goes on (issue 31 §2). A flow that
//! waits for an answer is saved in the state `waiting` with a [`PendingApproval`] in its
//! status; `ocflow approve` / `ocflow reject` (or the terminal's prompt, or MCP's
//! `ocflow_approve`) answer it, and the answer is journaled as `approval_answered`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a person is asked to approve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// The validated plan, before any step runs (`--approve plan`).
    Plan,
    /// A command the policy flags, or a recovery that replans or replaces steps
    /// (`--approve risky`).
    Risky,
    /// Writing a succeeded flow's changes into the repository (`--approve apply`).
    Apply,
}

impl fmt::Display for ApprovalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApprovalKind::Plan => "plan",
            ApprovalKind::Risky => "risky",
            ApprovalKind::Apply => "apply",
        })
    }
}

impl ApprovalKind {
    /// What is approved, as a sentence names it: "the plan", "the risky commands", "the
    /// apply" ("waiting for approval of the risky" lacked its noun).
    pub fn what(&self) -> &'static str {
        match self {
            ApprovalKind::Plan => "the plan",
            ApprovalKind::Risky => "the risky commands",
            ApprovalKind::Apply => "the apply",
        }
    }
}

/// The question a waiting flow holds until it is answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub kind: ApprovalKind,
    /// What to approve, in words (the plan's steps, the command and why it is flagged…).
    pub subject: String,
    /// The step it concerns, for a risky command or a recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// RFC 3339 time it was asked.
    pub asked_at: String,
    /// Whether the run was asked to apply the changes once it succeeds (`--apply`): the
    /// approval that continues it applies them too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub apply_after: bool,
    /// Whether the run asked for `--approve apply`: the apply after this approval is asked too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve_apply: bool,
}

/// How a person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Approved,
    Rejected,
    /// The plan was edited (and validated again) before it was approved.
    Edited,
}

/// Where an answer came from: a person at the terminal, `ocflow approve`/`reject`, or MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    Terminal,
    Command,
    Mcp,
}

/// Which approvals a run asks for (`--approve`, `[approve]` in the config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Approvals {
    pub plan: bool,
    pub risky: bool,
    pub apply: bool,
}

impl Approvals {
    /// Whether `kind` must be approved.
    pub fn asks(self, kind: ApprovalKind) -> bool {
        match kind {
            ApprovalKind::Plan => self.plan,
            ApprovalKind::Risky => self.risky,
            ApprovalKind::Apply => self.apply,
        }
    }

    /// Both sets together: an approval either asks for is asked.
    pub fn union(self, other: Approvals) -> Approvals {
        Approvals {
            plan: self.plan || other.plan,
            risky: self.risky || other.risky,
            apply: self.apply || other.apply,
        }
    }
}

#[cfg(test)]
mod what_is_approved {
    use super::*;

    /// Issue 38: "waits for approval of the risky: …" lacked its noun.
    #[test]
    fn each_kind_is_named_with_its_noun() {
        let said: Vec<String> = [ApprovalKind::Plan, ApprovalKind::Risky, ApprovalKind::Apply]
            .iter()
            .map(|kind| format!("waiting for approval of {}", kind.what()))
            .collect();
        assert_eq!(
            said,
            [
                "waiting for approval of the plan",
                "waiting for approval of the risky commands",
                "waiting for approval of the apply"
            ]
        );
    }
}

//! Roles (seed 000's crew): who a step is done by, and what that role may do — which operations,
//! whether it may run commands, whether it may open the network. Permissions are enforced, not
//! advised: a step its role may not take is a validation problem, for plans, recovery's revised
//! steps and hand-written flows alike. Built-in roles cover the usual crew; `[roles.NAME]` in
//! `ocflow.toml` adds roles or replaces a built-in one of the same name.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::flow::operations;
use ocflow_model::flow::Flow;
use ocflow_model::problem::Problem;

/// One role.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Role {
    /// What the role is for, shown to the planner.
    #[serde(default)]
    pub(crate) goal: String,
    /// Added to the system prompt of the role's LLM operations.
    #[serde(default)]
    pub prompt: Option<String>,
    /// The operations the role may use. A built-in role lists none here: its operations are
    /// declared with the operations (`operations.json`'s `roles`).
    pub(crate) operations: Vec<String>,
    /// The built-in role this is (`None` for a configured one).
    #[serde(skip)]
    built_in: Option<&'static str>,
    /// The model profile (`[llm.profiles.NAME]`) its LLM operations use.
    #[serde(default)]
    pub profile: Option<String>,
    /// Whether its command steps may open the network (`"network": true`).
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
}

impl Role {
    /// The operations it may use: its own list, or those that declare the built-in role.
    fn operation_names(&self) -> Vec<String> {
        match self.built_in {
            Some(name) => operations::role_operations(name)
                .map(<[String]>::to_vec)
                .unwrap_or_default(),
            None => self.operations.clone(),
        }
    }

    /// Whether the role may run commands: it may use an operation that runs one.
    pub(crate) fn runs_commands(&self) -> bool {
        self.operation_names()
            .iter()
            .any(|op| op == ANY || is_command(op))
    }

    /// Whether the role may use `operation`.
    pub(crate) fn may_use(&self, operation: &str) -> bool {
        self.operation_names()
            .iter()
            .any(|op| op == ANY || op == operation)
    }

    /// The operations it may use that the planner is offered, in words.
    fn operations_in_words(&self) -> String {
        let names = self.operation_names();
        if names.iter().any(|op| op == ANY) {
            return "any operation".into();
        }
        let offered = |op: &&String| operations::find(op).is_none_or(|spec| spec.offered);
        names
            .iter()
            .filter(offered)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// In a role's `operations`: every operation, plugins included.
const ANY: &str = "*";

/// Whether an operation runs commands.
fn is_command(operation: &str) -> bool {
    operations::find(operation).is_some_and(|op| op.runs_commands)
}

/// The roles a flow may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Roles {
    roles: BTreeMap<String, Role>,
    /// The model profiles a step may name itself (`default` and every `[llm.profiles.NAME]`),
    /// each with why it cannot be reached, if it cannot; `None` where no model is configured
    /// (a step that asks one fails for that, said then).
    profiles: Option<BTreeMap<String, Option<String>>>,
}

impl Default for Roles {
    fn default() -> Roles {
        Roles::with(BTreeMap::new())
    }
}

/// A built-in role: `developer` may use any operation; the others, the operations the
/// declarations list for them (`operations.json`'s `roles`).
fn built_in(name: &'static str, goal: &str, network: bool) -> (String, Role) {
    let any = name == DEVELOPER;
    let role = Role {
        goal: goal.into(),
        prompt: None,
        operations: if any {
            vec![ANY.to_string()]
        } else {
            Vec::new()
        },
        built_in: (!any).then_some(name),
        profile: None,
        network,
        max_tokens: None,
        temperature: None,
    };
    (name.to_string(), role)
}

/// The role that may do anything: the default for an operation that declares no other.
const DEVELOPER: &str = "developer";

/// Whether ocflow has a role of this name whatever the configuration (`developer`, and those
/// `operations.json` declares).
pub(crate) fn is_built_in(name: &str) -> bool {
    name == DEVELOPER || operations::built_in_roles().contains_key(name)
}

impl Roles {
    /// The built-in roles, then `configured` ones (which replace a built-in of the same name).
    pub fn with(configured: BTreeMap<String, Role>) -> Roles {
        let mut roles = BTreeMap::from([
            built_in(DEVELOPER, "does whatever the task needs", true),
            built_in("coder", "reads and changes code; runs no command", false),
            built_in(
                "tester",
                "writes and runs the tests and commands; changes no code",
                true,
            ),
            built_in("reviewer", "reads and reports; changes nothing", false),
            built_in("planner", "looks around and writes summaries", false),
        ]);
        roles.extend(configured);
        Roles {
            roles,
            profiles: None,
        }
    }

    /// The roles, with the model profiles a step may name (`profile`) checked like a role's:
    /// each profile's name, with why it cannot be reached if it cannot.
    pub fn with_profiles(mut self, profiles: BTreeMap<String, Option<String>>) -> Roles {
        self.profiles = Some(profiles);
        self
    }

    /// Every role, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Role)> {
        self.roles.iter()
    }

    /// The role a step gets when the flow names none: the narrowest built-in one that may use
    /// its operation, falling back to `developer`.
    pub(crate) fn default_for(&self, operation: &str) -> &'static str {
        operations::find(operation)
            .and_then(|op| op.default_role)
            .unwrap_or(DEVELOPER)
    }

    /// Gives every step without a role its default role (only when that role exists and may
    /// take the step; otherwise the check below says why).
    pub(crate) fn assign_defaults(&self, flow: &mut Flow) {
        for step in &mut flow.steps {
            if step.role.is_none() {
                step.role = Some(self.default_for(&step.operation).to_string());
            }
        }
    }

    /// Every step its role may not take: an unknown role, an operation the role may not use,
    /// a network it may not open. One problem each, naming the step, the role and the operation.
    pub(crate) fn check(&self, flow: &Flow) -> Vec<Problem> {
        let mut problems = Vec::new();
        let known: Vec<&str> = self.roles.keys().map(String::as_str).collect();
        for step in &flow.steps {
            if let (Some(profile), Some(profiles)) = (&step.profile, &self.profiles) {
                let message = match profiles.get(profile) {
                    None => Some(format!(
                        "profile `{profile}` is not a model profile (defined: {}); name one, or \
                         add [llm.profiles.{profile}] with base_url and model to ocflow.toml",
                        profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                    )),
                    Some(Some(why)) => Some(format!("profile `{profile}` cannot be asked: {why}")),
                    Some(None) => None,
                };
                if let Some(message) = message {
                    problems.push(Problem {
                        step: Some(step.id.clone()),
                        rule: "model",
                        message,
                    });
                }
            }
            let Some(name) = &step.role else { continue };
            let problem = |message: String| Problem {
                step: Some(step.id.clone()),
                rule: "role",
                message,
            };
            let Some(role) = self.roles.get(name) else {
                problems.push(problem(format!(
                    "role `{name}` is not a known role; known roles: {}",
                    known.join(", ")
                )));
                continue;
            };
            if !role.may_use(&step.operation) {
                let what = if is_command(&step.operation) && !role.runs_commands() {
                    "may not run commands"
                } else {
                    "may not use this operation"
                };
                problems.push(problem(format!(
                    "role `{name}` {what}: `{}` (it may use {}); give the step a role that may, \
                     or change the role's `operations` in ocflow.toml",
                    step.operation,
                    role.operations_in_words()
                )));
                continue;
            }
            if step.params.get("network") == Some(&Value::Bool(true)) && !role.network {
                problems.push(problem(format!(
                    "role `{name}` may not open the network, and `{}` asks for it",
                    step.operation
                )));
            }
        }
        problems
    }

    /// The flow with its defaults given, or every step its role may not take.
    pub fn apply(&self, mut flow: Flow) -> Result<Flow, Vec<Problem>> {
        self.assign_defaults(&mut flow);
        let problems = self.check(&flow);
        if problems.is_empty() {
            Ok(flow)
        } else {
            Err(problems)
        }
    }

    /// A sentence for every operation a role names that is not an operation (a typo, or a
    /// plugin that was not loaded).
    pub fn unknown_operations(&self) -> Vec<String> {
        let mut unknown = Vec::new();
        for (name, role) in &self.roles {
            for op in &role.operation_names() {
                if op != ANY && operations::find(op).is_none() {
                    unknown.push(format!(
                        "role `{name}` names `{op}`, which is not an operation (known: {}); check \
                         its spelling, or the plugin that should add it",
                        operations::names().join(", ")
                    ));
                }
            }
        }
        unknown
    }

    /// The roles as the planner's prompt lists them.
    pub(crate) fn catalogue(&self) -> String {
        self.roles
            .iter()
            .map(|(name, role)| {
                format!(
                    "- `{name}`: {}; may use {}\n",
                    role.goal,
                    role.operations_in_words()
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocflow_model::flow::Step;

    fn step(id: &str, operation: &str, role: Option<&str>) -> Step {
        serde_json::from_value(serde_json::json!({"id": id, "operation": operation,
            "params": {}, "role": role}))
        .unwrap()
    }

    #[test]
    fn defaults_are_allowed_and_permissions_are_enforced() {
        let roles = Roles::default();
        let mut flow = Flow {
            version: 1,
            task: String::new(),
            steps: vec![
                step("a", "modify_code", None),
                step("b", "run_tests", None),
                step("c", "execute_shell_command", Some("coder")),
                step("d", "read_file", Some("wizard")),
            ],
            deliverables: None,
        };
        roles.assign_defaults(&mut flow);
        assert_eq!(flow.steps[0].role.as_deref(), Some("coder"));
        assert_eq!(flow.steps[1].role.as_deref(), Some("tester"));
        let problems: Vec<String> = roles.check(&flow).iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("role `coder` may not run commands"));
        assert!(problems[1].contains("role `wizard` is not a known role; known roles: coder"));
    }
}

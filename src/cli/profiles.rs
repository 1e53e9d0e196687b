//! Model profiles: named endpoints and models (`[llm.profiles.NAME]`) for each purpose —
//! planning, recovery, the summary, the library's operations — and for each role, so one flow
//! can plan on a large model and code on a small local one. Flags, environment and `[llm]` set
//! the `default` profile; a profile named by a purpose or a role wins over them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::cli::args::GlobalArgs;
use crate::cli::layered::layered;
use ocflow_core::flow::path_rules::absolute;
use ocflow_core::flow::roles::Roles;
use ocflow_core::llm::client::{Endpoint, RetryPolicy};
use ocflow_core::llm::key::{self, ApiKey};
use ocflow_model::error::{Error, Result};
use ocflow_model::llm::{DEFAULT_PROFILE, ModelSettings};

/// Why no LLM is configured; the message names what to set.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NoLlm(pub(crate) String);

/// How to reach the LLM and which models to use.
#[derive(Debug, Clone)]
pub(crate) struct LlmConfig {
    /// The endpoint of every model profile in use, by name (`default`: the one flags,
    /// environment and `[llm]` set); empty when answers come from a recording.
    pub(crate) endpoints: BTreeMap<String, Endpoint>,
    /// For planning.
    pub(crate) planner: ModelSettings,
    /// For recovery strategies.
    pub(crate) recovery: ModelSettings,
    /// For the final summary.
    pub(crate) summary: ModelSettings,
    /// For the library's LLM operations.
    pub(crate) operations: ModelSettings,
    /// The model of a role's LLM operations, for roles that name a profile or limits.
    pub(crate) roles: BTreeMap<String, ModelSettings>,
    /// Every profile's model (`default` included), for steps that name a profile or a model
    /// themselves.
    pub(crate) profiles: BTreeMap<String, ModelSettings>,
    pub(crate) record: Option<PathBuf>,
    pub(crate) replay: Option<PathBuf>,
    /// Prints the key when no variable or file gave one (`[llm] api_key_command`).
    pub(crate) key_command: Option<String>,
    /// The profiles whose endpoint takes the default key (the command's, when it gives it).
    pub(crate) default_key_profiles: Vec<String>,
    /// Profiles in use without an endpoint, with what to configure: a flow whose LLM steps all
    /// take roles with endpoints of their own runs without the default one.
    pub(crate) unavailable: BTreeMap<String, String>,
}

impl LlmConfig {
    /// What to configure before `settings`' profile can answer; `None` when it can.
    pub(crate) fn unavailable_for(&self, settings: &ModelSettings) -> Option<&str> {
        self.unavailable.get(&settings.profile).map(String::as_str)
    }
}

/// `[llm]` in a config file. The key itself is never in a config file: it comes from the
/// environment, the file `OCFLOW_API_KEY_FILE` names, or `api_key_command`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileLlm {
    pub(crate) base_url: Option<String>,
    /// A command that prints the key (a password manager, a credential helper), run once when
    /// a command needs the LLM and no key variable or file gave one.
    pub(crate) api_key_command: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) request_timeout_seconds: Option<u64>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) max_retry_seconds: Option<u64>,
    /// Settings for planning and summarising.
    #[serde(default)]
    pub(crate) planner: FileModel,
    /// Settings for the library's LLM operations.
    #[serde(default)]
    pub(crate) operations: FileModel,
    /// Named endpoints and models (`[llm.profiles.NAME]`).
    #[serde(default)]
    pub(crate) profiles: BTreeMap<String, FileProfile>,
    pub(crate) planner_profile: Option<String>,
    pub(crate) recovery_profile: Option<String>,
    pub(crate) summary_profile: Option<String>,
    pub(crate) operations_profile: Option<String>,
}

// Field by field: a profile of the same name changes only what it says (an untrusted
// repository's, stripped of its URL and key, cannot reroute the user's).
layered!(FileLlm {
    base_url,
    api_key_command,
    model,
    request_timeout_seconds,
    max_attempts,
    max_retry_seconds,
    planner,
    operations,
    profiles,
    planner_profile,
    recovery_profile,
    summary_profile,
    operations_profile,
});

/// `[llm.planner]` / `[llm.operations]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileModel {
    pub(crate) model: Option<String>,
    pub(crate) temperature: Option<f32>,
    pub(crate) max_tokens: Option<u32>,
}

layered!(FileModel {
    model,
    temperature,
    max_tokens
});

/// `[llm.profiles.NAME]` in a config file. Its key comes from the variable `api_key_env`
/// names or the file `api_key_file` names, never from the file itself.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileProfile {
    pub(crate) base_url: Option<String>,
    pub(crate) model: Option<String>,
    /// The environment variable holding this profile's key; ocflow takes it out of its own
    /// environment at start-up, like the default key's variables.
    pub(crate) api_key_env: Option<String>,
    /// A file holding this profile's key (only its owner may read it).
    pub(crate) api_key_file: Option<String>,
    pub(crate) temperature: Option<f32>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) request_timeout_seconds: Option<u64>,
    /// What a million tokens of this profile's model cost, in US dollars (for `--max-cost`).
    pub(crate) price_per_mtok_in: Option<f64>,
    pub(crate) price_per_mtok_out: Option<f64>,
}

layered!(FileProfile {
    base_url,
    model,
    api_key_env,
    api_key_file,
    temperature,
    max_tokens,
    request_timeout_seconds,
    price_per_mtok_in,
    price_per_mtok_out,
});

impl FileProfile {
    /// Takes out what an untrusted repository may not set: where the key goes and where it is
    /// read from. Returns whether there was any.
    pub(crate) fn without_untrusted(&mut self) -> bool {
        let url = self.base_url.take().is_some();
        let variable = self.api_key_env.take().is_some();
        let file = self.api_key_file.take().is_some();
        url | variable | file
    }
}

/// The purposes a profile can be named for, with the `[llm]` key naming it.
const PURPOSES: &[&str] = &[
    "planner_profile",
    "recovery_profile",
    "summary_profile",
    "operations_profile",
];

/// LiteLLM's provider prefixes for OpenAI-compatible servers (OpenHands' `LLM_MODEL` carries
/// one: `openai/gpt-4o`, `hosted_vllm/…`): not part of the name the server knows. A served name
/// with a slash of its own (`mistralai/Devstral-Small-2505`) is left whole.
const PROVIDER_PREFIXES: &[&str] = &[
    "openai",
    "hosted_vllm",
    "litellm_proxy",
    "openrouter",
    "custom_openai",
    "text-completion-openai",
    "lm_studio",
    "vllm",
];

/// The model name as the endpoint knows it.
pub(crate) fn without_provider(model: &str) -> &str {
    match model.split_once('/') {
        Some((provider, name)) if PROVIDER_PREFIXES.contains(&provider) && !name.is_empty() => name,
        _ => model,
    }
}

/// The first non-empty environment variable of `names`.
pub(crate) fn env_first(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// What flags, environment and `[llm]` say: the default profile.
struct Defaults<'a> {
    base_url: Option<String>,
    model: Option<String>,
    key: ApiKey,
    file: &'a FileLlm,
    replay: bool,
}

impl Defaults<'_> {
    fn endpoint(
        &self,
        profile: &str,
        url: &str,
        key: ApiKey,
        timeout: Option<u64>,
    ) -> Result<Endpoint> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            let whose = if profile == DEFAULT_PROFILE {
                "the base URL".to_string()
            } else {
                format!("[llm.profiles.{profile}] base_url")
            };
            return Err(Error::Usage(format!(
                "{whose} {url:?} must start with http:// or https:// (for example \
                 http://localhost:8000/v1)"
            )));
        }
        let file = self.file;
        // The setting that gave the time limit is the one a timeout message names.
        let timeout_setting = if timeout.is_some() && profile != DEFAULT_PROFILE {
            format!("request_timeout_seconds under [llm.profiles.{profile}]")
        } else {
            "request_timeout_seconds under [llm]".to_string()
        };
        Ok(Endpoint {
            base_url: url.trim_end_matches('/').to_string(),
            api_key: key,
            timeout_setting,
            request_timeout: Duration::from_secs(
                timeout
                    .or(file.request_timeout_seconds)
                    .unwrap_or(120)
                    .max(1),
            ),
            retry: RetryPolicy {
                max_attempts: file.max_attempts.unwrap_or(5).max(1),
                max_elapsed: Duration::from_secs(file.max_retry_seconds.unwrap_or(300)),
                ..RetryPolicy::default()
            },
        })
    }
}

/// Flags > environment > config files for the default profile; the named profiles as
/// configured. `Err(message)` when no endpoint or model is configured for a purpose.
pub(crate) fn resolve_llm(
    args: &GlobalArgs,
    file: &FileLlm,
    roles: &Roles,
    api_key: ApiKey,
) -> Result<std::result::Result<LlmConfig, NoLlm>> {
    let replay = args.replay.as_ref().map(|p| absolute(p)).transpose()?;
    let record = args.record.as_ref().map(|p| absolute(p)).transpose()?;
    let defaults = Defaults {
        base_url: args
            .base_url
            .clone()
            .or_else(|| env_first(&["OCFLOW_BASE_URL", "OPENAI_BASE_URL", "LLM_BASE_URL"]))
            .or_else(|| file.base_url.clone()),
        model: args
            .model
            .clone()
            .or_else(|| env_first(&["OCFLOW_MODEL", "LLM_MODEL"])),
        key: api_key,
        file,
        replay: replay.is_some(),
    };
    check_profile_names(file, roles)?;
    // The endpoints first: a missing URL is the first thing to tell.
    let mut used: Vec<String> = PURPOSES.iter().map(|p| profile_of(file, p)).collect();
    used.extend(roles.iter().filter_map(|(_, role)| role.profile.clone()));
    used.sort_unstable();
    used.dedup();
    let mut reached = Reached::default();
    if !defaults.replay {
        if let Err(no_llm) = reached.used(&used, &defaults)? {
            return Ok(Err(no_llm));
        }
        // No profile in use has an endpoint: nothing can be asked.
        if let (Some(first), true) = (
            reached.unavailable.values().next(),
            reached.endpoints.is_empty(),
        ) {
            return Ok(Err(NoLlm(first.clone())));
        }
        reached.others(&used, &defaults);
    }
    let no_model = || {
        Ok(Err(NoLlm(
            "no model is configured: set OCFLOW_MODEL (or LLM_MODEL), pass --model NAME, or set \
             model under [llm] in ocflow.toml"
                .into(),
        )))
    };
    // A profile without an endpoint needs no model either: asking it says what is missing.
    let purpose = |name: &str, section: &FileModel, max_tokens: u32| {
        let profile = profile_of(file, name);
        defaults
            .settings(&profile, section, max_tokens)
            .or_else(|| {
                reached
                    .unavailable
                    .contains_key(&profile)
                    .then(|| ModelSettings {
                        profile: profile.clone(),
                        model: String::new(),
                        temperature: None,
                        max_tokens: None,
                    })
            })
    };
    let (Some(planner), Some(recovery), Some(summary), Some(operations)) = (
        purpose("planner_profile", &file.planner, 4096),
        purpose("recovery_profile", &file.planner, 4096),
        purpose("summary_profile", &file.planner, 4096),
        purpose("operations_profile", &file.operations, 8192),
    ) else {
        return no_model();
    };
    // Every profile's model, for a step that names the profile itself.
    let profile_models = file
        .profiles
        .keys()
        .map(String::as_str)
        .chain([DEFAULT_PROFILE])
        .filter_map(|profile| {
            let model = defaults.settings(profile, &file.operations, 8192)?;
            Some((profile.to_string(), model))
        })
        .collect();
    let Some(role_models) = defaults.role_models(roles, &operations) else {
        return no_model();
    };
    Ok(Ok(LlmConfig {
        endpoints: reached.endpoints,
        planner,
        recovery,
        summary,
        operations,
        roles: role_models,
        profiles: profile_models,
        record,
        replay,
        key_command: file.api_key_command.clone(),
        default_key_profiles: reached.inheriting,
        unavailable: reached.unavailable,
    }))
}

/// Every profile a purpose (`[llm] planner_profile = …`) or a role names must be defined.
fn check_profile_names(file: &FileLlm, roles: &Roles) -> Result<()> {
    let known = || {
        let names: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none is defined".to_string()
        } else {
            format!("defined: {}", names.join(", "))
        }
    };
    let named = PURPOSES
        .iter()
        .filter_map(|purpose| Some((format!("[llm] {purpose}"), named(file, purpose)?)));
    let by_roles = roles.iter().filter_map(|(role_name, role)| {
        Some((
            format!("[roles.{role_name}] profile"),
            role.profile.as_ref()?,
        ))
    });
    for (setting, name) in named.chain(by_roles) {
        if name != DEFAULT_PROFILE && !file.profiles.contains_key(name) {
            return Err(Error::Usage(format!(
                "{setting} = {name:?}: there is no profile of that name ({}); add \
                 [llm.profiles.{name}] with base_url and model to ocflow.toml",
                known()
            )));
        }
    }
    Ok(())
}

/// The profile `[llm]` names for `purpose` (`planner_profile`, …), if it names one.
fn named<'a>(file: &'a FileLlm, purpose: &str) -> Option<&'a String> {
    match purpose {
        "planner_profile" => file.planner_profile.as_ref(),
        "recovery_profile" => file.recovery_profile.as_ref(),
        "summary_profile" => file.summary_profile.as_ref(),
        _ => file.operations_profile.as_ref(),
    }
}

/// The profile used for `purpose`: recovery and the summary follow planning unless told
/// otherwise; else the default profile.
fn profile_of(file: &FileLlm, purpose: &str) -> String {
    named(file, purpose)
        .cloned()
        .or_else(|| match purpose {
            "recovery_profile" | "summary_profile" => file.planner_profile.clone(),
            _ => None,
        })
        .unwrap_or_else(|| DEFAULT_PROFILE.to_string())
}

/// The profiles' endpoints as far as they can be reached, and why the others cannot.
#[derive(Default)]
struct Reached {
    endpoints: BTreeMap<String, Endpoint>,
    /// The profiles given the default key (`Inherited`).
    inheriting: Vec<String>,
    unavailable: BTreeMap<String, String>,
}

impl Reached {
    /// The profiles in use: one without a URL is unavailable (said when asked); one whose key
    /// cannot be used leaves no LLM at all (`Err`: commands that need no model still work).
    fn used(
        &mut self,
        used: &[String],
        defaults: &Defaults,
    ) -> Result<std::result::Result<(), NoLlm>> {
        for profile in used {
            let profile = profile.as_str();
            let own = defaults.file.profiles.get(profile);
            let url = own.and_then(|p| p.base_url.clone());
            let Some(url) = url.or_else(|| defaults.base_url.clone()) else {
                let which = if profile == DEFAULT_PROFILE {
                    String::new()
                } else {
                    format!(
                        " (the profile {profile:?} has no base_url of its own either; set one \
                         under [llm.profiles.{profile}])"
                    )
                };
                self.unavailable.insert(
                    profile.to_string(),
                    format!(
                        "no LLM endpoint is configured{which}: set OCFLOW_BASE_URL (or \
                         OPENAI_BASE_URL / LLM_BASE_URL) to an OpenAI-compatible URL such as \
                         http://localhost:8000/v1, or pass --base-url URL; the key comes from \
                         OCFLOW_API_KEY (or OPENAI_API_KEY / LLM_API_KEY) and the model from \
                         OCFLOW_MODEL (or LLM_MODEL) or --model"
                    ),
                );
                continue;
            };
            let (key, inherited) = match profile_key(profile, own, &url, defaults) {
                Ok(found) => found,
                Err(problem) => return Ok(Err(NoLlm(problem))),
            };
            if inherited {
                self.inheriting.push(profile.to_string());
            }
            let timeout = own.and_then(|p| p.request_timeout_seconds);
            let endpoint = defaults.endpoint(profile, &url, key, timeout)?;
            self.endpoints.insert(profile.to_string(), endpoint);
        }
        Ok(Ok(()))
    }

    /// The profiles only a step may name (`"profile"` in a flow): reached when they can be.
    /// One that cannot (no URL, its key variable unset) is unavailable, said if a step asks
    /// it, never an error for the flows that do not.
    fn others(&mut self, used: &[String], defaults: &Defaults) {
        let others = defaults.file.profiles.iter();
        for (profile, own) in others.filter(|(name, _)| !used.contains(name)) {
            let Some(url) = own.base_url.clone().or_else(|| defaults.base_url.clone()) else {
                self.unavailable.insert(
                    profile.clone(),
                    format!(
                        "the profile {profile:?} has no base_url (set one under \
                         [llm.profiles.{profile}], or the default endpoint)"
                    ),
                );
                continue;
            };
            let reached =
                profile_key(profile, Some(own), &url, defaults).and_then(|(key, inherited)| {
                    let timeout = own.request_timeout_seconds;
                    let endpoint = defaults.endpoint(profile, &url, key, timeout);
                    endpoint.map(|e| (e, inherited)).map_err(|e| e.to_string())
                });
            match reached {
                Ok((endpoint, inherited)) => {
                    if inherited {
                        self.inheriting.push(profile.clone());
                    }
                    self.endpoints.insert(profile.clone(), endpoint);
                }
                Err(problem) => {
                    self.unavailable.insert(profile.clone(), problem);
                }
            }
        }
    }
}

impl Defaults<'_> {
    /// The model settings of `profile` for a purpose configured by `section`: the profile's
    /// own, else the flags and environment, else the section's, else `[llm]`'s; `None` without
    /// a model name.
    fn settings(
        &self,
        profile: &str,
        section: &FileModel,
        max_tokens: u32,
    ) -> Option<ModelSettings> {
        let file = self.file;
        let own = file.profiles.get(profile);
        let name = own
            .and_then(|p| p.model.clone())
            .or_else(|| self.model.clone())
            .or_else(|| section.model.clone())
            .or_else(|| file.model.clone())
            .or_else(|| self.replay.then(|| "replay".to_string()))?;
        Some(ModelSettings {
            profile: profile.to_string(),
            model: without_provider(&name).to_string(),
            temperature: Some(
                own.and_then(|p| p.temperature)
                    .or(section.temperature)
                    .unwrap_or(0.2),
            ),
            max_tokens: Some(
                own.and_then(|p| p.max_tokens)
                    .or(section.max_tokens)
                    .unwrap_or(max_tokens),
            ),
        })
    }

    /// The models of the roles that change them (a profile, a temperature, a token cap), from
    /// the `operations` model; `None` when a role's profile has no model.
    fn role_models(
        &self,
        roles: &Roles,
        operations: &ModelSettings,
    ) -> Option<BTreeMap<String, ModelSettings>> {
        let mut role_models = BTreeMap::new();
        for (name, role) in roles.iter() {
            if role.profile.is_none() && role.temperature.is_none() && role.max_tokens.is_none() {
                continue;
            }
            let mut model = match &role.profile {
                Some(profile) => self.settings(profile, &self.file.operations, 8192)?,
                None => operations.clone(),
            };
            model.temperature = role.temperature.or(model.temperature);
            model.max_tokens = role.max_tokens.or(model.max_tokens);
            role_models.insert(name.clone(), model);
        }
        Some(role_models)
    }
}

/// A profile's key: its own variable or file; else the default key when the profile talks to
/// the default endpoint (`Inherited`); else none (a key is never sent to another host unasked).
/// The problem, in words, when its variable is not set or its file cannot be used.
fn profile_key(
    profile: &str,
    own: Option<&FileProfile>,
    url: &str,
    defaults: &Defaults<'_>,
) -> std::result::Result<(ApiKey, bool), String> {
    let Some(own) = own else {
        return Ok((defaults.key.clone(), true));
    };
    if let Some(variable) = &own.api_key_env {
        let key = key::take_variable(variable).ok_or_else(|| {
            format!(
                "[llm.profiles.{profile}] api_key_env = {variable:?}, but that variable is not \
                 set: export it, or remove api_key_env"
            )
        })?;
        return Ok((key, false));
    }
    if let Some(path) = &own.api_key_file {
        let key = key::from_file(Path::new(path))
            .map_err(|err| format!("[llm.profiles.{profile}] api_key_file: {err}"))?;
        return Ok((key, false));
    }
    let same_host = defaults
        .base_url
        .as_deref()
        .map(|u| u.trim_end_matches('/'))
        == Some(url.trim_end_matches('/'));
    Ok(if same_host {
        (defaults.key.clone(), true)
    } else {
        (ApiKey::default(), false)
    })
}

/// Takes every profile's key variable out of the environment, used or not, before anything
/// starts a process: no step, probe or helper inherits one.
pub(crate) fn take_key_variables(file: &FileLlm) {
    for profile in file.profiles.values() {
        if let Some(variable) = &profile.api_key_env {
            let _ = key::take_variable(variable);
        }
    }
}

/// Refuses a profile or role name that is not letters, digits, `_` and `-` (at most 64): names
/// are printed to terminals, and a config may come from an untrusted repository.
pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if fine {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "[{what}.{}]: a name is letters, digits, `_` and `-` (at most 64); rename it",
            name.escape_debug()
        )))
    }
}

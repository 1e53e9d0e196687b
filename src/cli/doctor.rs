//! `ocflow doctor`: what this machine gives ocflow, each check with its fix — the embedded
//! Python and the library, the syntax checks' grammars, bubblewrap and namespaces, overlays,
//! Landlock, cgroups, the key's source, and the endpoint and model (one tiny request). A person
//! runs it after an install; an agent runs it first.

use serde::Serialize;

use crate::cli::config::Config;
use crate::cli::launch;
use ocflow_model::error::Result;
use ocflow_model::exit::ExitCode;
use ocflow_model::llm::{ChatRequest, Message};
use ocflow_model::output::{print_stdout, printable};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    Ok,
    /// ocflow works, with less (a weaker sandbox, unchecked syntax).
    Warn,
    /// ocflow cannot do its work until this is fixed.
    Fail,
}

/// One check: what was looked at, what was found, and what to do.
#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    verdict: Verdict,
    found: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn new(name: &'static str, verdict: Verdict, found: impl Into<String>) -> Check {
        Check {
            name,
            verdict,
            found: found.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}

/// `ocflow doctor`: exit 0 when nothing fails (warnings allowed), 1 otherwise.
pub(crate) fn doctor(config: &Config) -> Result<ExitCode> {
    let mut checks = library_checks(config);
    checks.extend(sandbox_checks(config));
    checks.push(key_check(config));
    checks.push(endpoint_check(config));
    show(&checks, config.json);
    Ok(if checks.iter().any(|c| c.verdict == Verdict::Fail) {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

fn library_checks(config: &Config) -> Vec<Check> {
    let bridge = match launch::load_bridge(config) {
        Ok(bridge) => bridge,
        Err(err) => {
            return vec![
                Check::new("python library", Verdict::Fail, format!("{err:#}"))
                    .fix("install the library: `pip install ./python` from ocflow's source tree"),
            ];
        }
    };
    let mut checks = vec![Check::new(
        "python library",
        Verdict::Ok,
        bridge.description.clone(),
    )];
    checks.push(match bridge.syntax_checks() {
        Ok(languages) => {
            let missing: Vec<&(String, Option<String>)> = languages
                .iter()
                .filter(|(_, problem)| problem.is_some())
                .collect();
            if missing.is_empty() {
                let names: Vec<&str> = languages.iter().map(|(l, _)| l.as_str()).collect();
                Check::new(
                    "syntax checks",
                    Verdict::Ok,
                    format!("Python, JSON, TOML and {}", names.join(", ")),
                )
            } else {
                let names: Vec<&str> = missing.iter().map(|(l, _)| l.as_str()).collect();
                let first = missing[0].1.clone().unwrap_or_default();
                Check::new(
                    "syntax checks",
                    Verdict::Warn,
                    format!(
                        "no grammar for {} (rewrites of such files are written unchecked): {first}",
                        names.join(", ")
                    ),
                )
                .fix("`pip install ./python` installs every grammar with the library")
            }
        }
        Err(err) => Check::new("syntax checks", Verdict::Warn, format!("{err:#}"))
            .fix("`pip install ./python` installs the library with its grammars"),
    });
    checks
}

fn sandbox_checks(config: &Config) -> Vec<Check> {
    let bwrap = which("bwrap");
    let mut checks = vec![match &bwrap {
        Some(path) => Check::new("bubblewrap", Verdict::Ok, path.display().to_string()),
        None => Check::new("bubblewrap", Verdict::Warn, "not installed")
            .fix("install it (`apt-get install bubblewrap`): commands then get namespaces"),
    }];
    let plan = match config.run.sandbox.plan() {
        Ok(plan) => plan,
        Err(err) => {
            checks.push(
                Check::new("sandbox", Verdict::Fail, format!("{err:#}"))
                    .fix("fix the cause, or set `[sandbox] namespaces = false`"),
            );
            return checks;
        }
    };
    let Some(plan) = plan else {
        checks.push(
            Check::new(
                "sandbox",
                Verdict::Warn,
                "none: neither namespaces nor Landlock here; commands run unconfined",
            )
            .fix("install bubblewrap, or use a kernel with Landlock (5.13 or later)"),
        );
        return checks;
    };
    checks.push(match (&plan.bwrap, &bwrap) {
        (Some(_), _) if !plan.isolates_processes() => Check::new(
            "namespaces",
            Verdict::Warn,
            "mount, network and IPC namespaces, but no PID namespace: the kernel refuses a \
             fresh /proc here (a container's masked /proc), so commands can see other processes",
        )
        .fix("run the container with CAP_SYS_ADMIN, or with its /proc unmasked"),
        (Some(_), _) => Check::new(
            "namespaces",
            Verdict::Ok,
            "PID, mount, network and IPC namespaces for every command step",
        ),
        (None, Some(_)) => Check::new(
            "namespaces",
            Verdict::Warn,
            "refused here (or `[sandbox] namespaces = false`): commands can see other \
             processes and host sockets",
        )
        .fix("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"),
        (None, None) => Check::new("namespaces", Verdict::Warn, "none without bubblewrap")
            .fix("install bubblewrap"),
    });
    checks.push(if plan.overlay {
        Check::new(
            "overlay",
            Verdict::Ok,
            "views made of layers: nothing of the repository is copied",
        )
    } else {
        Check::new(
            "overlay",
            Verdict::Warn,
            "views are copies (slower on large repositories)",
        )
        .fix("overlays need namespaces and a kernel that allows them in user namespaces (5.11+)")
    });
    // Without a user namespace a step started by root would keep root's capabilities on the
    // host: the launcher drops them all (bubblewrap does in its namespace).
    checks.push(Check::new(
        "capabilities",
        Verdict::Ok,
        if plan.bwrap.is_some() {
            "dropped: commands run in bubblewrap's user namespace with none, and no_new_privs"
        } else {
            "dropped by the launcher (no user namespace here): none in any set, and \
             no_new_privs"
        },
    ));
    checks.push(match plan.landlock.as_str() {
        "landlock" => Check::new("landlock", Verdict::Ok, "enforced in full"),
        "none" => Check::new("landlock", Verdict::Warn, "not available in this kernel")
            .fix("a kernel with Landlock (5.13 or later, enabled in the LSM list)"),
        other => Check::new("landlock", Verdict::Warn, format!("{other} (an older ABI)"))
            .fix("a newer kernel enforces more"),
    });
    // What the step cgroups hold here, as results will say it (`step_cgroup.rs`).
    let layers = plan.layers(false);
    checks.push(if plan.process_limit == "cgroup" {
        Check::new(
            "cgroups",
            Verdict::Ok,
            format!(
                "at most {} processes per step, memory {}; what a step leaves ends with it",
                plan.max_processes, layers.memory
            ),
        )
    } else {
        Check::new(
            "cgroups",
            Verdict::Warn,
            format!(
                "no cgroup with limits can be made here: processes {}, memory {}",
                layers.processes, layers.memory
            ),
        )
        .fix("run ocflow as root (a cgroup v2 subtree delegated to the user is not used yet)")
    });
    // Datagrams (DNS tunnelling): a network namespace holds them, else the socket filter.
    checks.push(match (layers.udp.as_str(), plan.bwrap.is_some()) {
        ("blocked", true) => Check::new(
            "udp",
            Verdict::Ok,
            "blocked: each step has a network namespace of its own",
        ),
        ("blocked", false) => Check::new(
            "udp",
            Verdict::Ok,
            "blocked by a seccomp socket filter (no namespaces here)",
        ),
        (other, _) => Check::new(
            "udp",
            Verdict::Warn,
            format!("{other}: a step without the network can still send datagrams"),
        )
        .fix("install bubblewrap, or run on a kernel with seccomp"),
    });
    checks
}

fn key_check(config: &Config) -> Check {
    let from_command = config
        .llm
        .as_ref()
        .ok()
        .and_then(|llm| llm.key_command.as_ref());
    match (&config.key_variable, from_command) {
        (Some(variable), _) => Check::new("api key", Verdict::Ok, format!("from {variable}")),
        (None, Some(_)) => Check::new("api key", Verdict::Ok, "from `[llm] api_key_command`"),
        (None, None) => Check::new(
            "api key",
            Verdict::Ok,
            "none given (local servers such as llama.cpp need none)",
        )
        .fix("set OCFLOW_API_KEY, OPENAI_API_KEY or LLM_API_KEY for a hosted endpoint"),
    }
}

/// One tiny request to the planner's endpoint and model.
fn endpoint_check(config: &Config) -> Check {
    let llm_config = match &config.llm {
        Ok(llm) => llm,
        Err(missing) => {
            return Check::new("endpoint", Verdict::Fail, missing.to_string())
                .fix("set OCFLOW_BASE_URL and OCFLOW_MODEL, or --base-url and --model");
        }
    };
    let llm = match launch::connect_llm(config) {
        Ok(Some(llm)) => llm,
        Ok(None) => return Check::new("endpoint", Verdict::Fail, "no LLM endpoint is configured"),
        Err(err) => return Check::new("endpoint", Verdict::Fail, format!("{err:#}")),
    };
    if let Some(missing) = llm_config.unavailable_for(&llm_config.planner) {
        return Check::new("endpoint", Verdict::Fail, missing.to_string())
            .fix("give the default profile (planning) an endpoint: OCFLOW_BASE_URL or --base-url");
    }
    let mut settings = llm_config.planner.clone();
    settings.max_tokens = Some(8);
    let request = ChatRequest {
        purpose: "doctor".into(),
        settings,
        messages: vec![Message::user("Answer with the one word OK.")],
        json: false,
        schema: None,
        optional: false,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return Check::new("endpoint", Verdict::Fail, err.to_string()),
    };
    let started = std::time::Instant::now();
    let model = &llm_config.planner.model;
    match runtime.block_on(llm.chat(&request)) {
        Ok(_) => Check::new(
            "endpoint",
            Verdict::Ok,
            format!(
                "model {model} answered in {} ms",
                started.elapsed().as_millis()
            ),
        ),
        Err(err) => Check::new("endpoint", Verdict::Fail, format!("model {model}: {err}"))
            .fix("check the base URL, the model name and the API key"),
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

fn show(checks: &[Check], json: bool) {
    if json {
        let text = serde_json::json!({ "checks": checks });
        print_stdout(&format!("{text}\n"));
        return;
    }
    let mut out = String::new();
    for check in checks {
        let mark = match check.verdict {
            Verdict::Ok => "✓",
            Verdict::Warn => "!",
            Verdict::Fail => "✗",
        };
        out.push_str(&format!(
            "{mark} {:<15} {}\n",
            check.name,
            printable(&check.found)
        ));
        if let (Some(fix), false) = (&check.fix, check.verdict == Verdict::Ok) {
            out.push_str(&format!("  {:<15} fix: {}\n", "", printable(fix)));
        }
    }
    print_stdout(&out);
}

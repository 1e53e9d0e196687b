//! `ocflow trust`: obey a repository's own config in full from now on (`--revoke`: no longer).
//! A cloned repository can ship `.ocflow/ocflow.toml`; what in it runs or loads code, widens the
//! sandbox or sends the key elsewhere is ignored until the user says so here, once, as Codex
//! and Claude Code ask before trusting a folder. The trust is kept in the user's own config
//! (`[trust] repositories`), edited in place so its comments and layout survive.

use std::fs;

use crate::cli::args::TrustArgs;
use crate::cli::config::Config;
use ocflow_core::task::workspace::write_atomic;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::say;

pub(crate) fn trust(config: &Config, args: TrustArgs) -> Result<ExitCode> {
    let path = config.user_config.as_ref().ok_or_else(|| {
        Error::Usage("no user config directory: set HOME or XDG_CONFIG_HOME".into())
    })?;
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).io_context(|| format!("reading {}", path.display())),
    };
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|err| Error::Usage(format!("{}: {err}", path.display())))?;
    let repo = config.repo.to_string_lossy().into_owned();
    let table = document.entry("trust").or_insert_with(toml_edit::table);
    let list = table
        .as_table_like_mut()
        .ok_or_else(|| Error::Usage(format!("{}: `trust` must be a table", path.display())))?
        .entry("repositories")
        .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| {
            Error::Usage(format!(
                "{}: `trust.repositories` must be a list",
                path.display()
            ))
        })?;
    let present = list
        .iter()
        .position(|item| item.as_str() == Some(repo.as_str()));
    let verb = match (args.revoke, present) {
        (false, None) => {
            list.push(repo.as_str());
            "trusts"
        }
        (true, Some(index)) => {
            list.remove(index);
            "no longer trusts"
        }
        (false, Some(_)) => "already trusts",
        (true, None) => "did not trust",
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).io_context(|| format!("creating {}", dir.display()))?;
    }
    write_atomic(path, document.to_string().as_bytes())?;
    say(&format!(
        "ocflow {verb} {repo} (kept in {})",
        path.display()
    ));
    Ok(ExitCode::Success)
}

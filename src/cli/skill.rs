//! `ocflow skill`: the OpenHands skill that teaches an agent when and how to call ocflow
//! (`skills/ocflow/SKILL.md`, built into the binary so an installed ocflow carries it).
//! `--install DIR` puts it where OpenHands reads a repository's or workspace's skills,
//! `DIR/.agents/skills/ocflow/SKILL.md`, never through a symlink (a cloned repository could
//! point one anywhere) and never over a different file unless `--force`, which keeps a copy.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use crate::cli::args::SkillArgs;
use crate::cli::config::Config;
use ocflow_core::task::workspace::write_atomic;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::{print_stdout, say};

/// The skill's text; its folder name and front matter `name` are both `ocflow`.
const SKILL: &str = include_str!("../../skills/ocflow/SKILL.md");
/// Where OpenHands looks, below the directory it opens.
const SKILL_DIR: [&str; 3] = [".agents", "skills", "ocflow"];

pub(crate) fn skill(config: &Config, args: SkillArgs) -> Result<ExitCode> {
    let Some(dir) = args.install else {
        if config.json {
            let line = serde_json::json!({"version": 1, "name": "ocflow", "text": SKILL});
            print_stdout(&format!("{line}\n"));
        } else {
            print_stdout(SKILL);
        }
        return Ok(ExitCode::Success);
    };
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "--install {}: not a directory; give the repository or workspace OpenHands opens",
            dir.display()
        )));
    }
    let mut folder = dir.clone();
    for part in SKILL_DIR {
        folder.push(part);
        refuse_symlink(&folder)?;
    }
    let path = folder.join("SKILL.md");
    refuse_symlink(&path)?;
    match fs::read_to_string(&path) {
        Ok(existing) if existing == SKILL => {
            say(&format!(
                "ocflow: {} is already ocflow's skill",
                path.display()
            ));
            return Ok(ExitCode::Success);
        }
        Ok(existing) if args.force => {
            write_atomic(&folder.join("SKILL.md.bak"), existing.as_bytes())?;
        }
        Ok(_) => {
            return Err(Error::Usage(format!(
                "{} exists and differs from ocflow's skill; nothing was written. Pass --force to \
                 replace it (the old one is kept as SKILL.md.bak)",
                path.display()
            )));
        }
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(err).io_context(|| format!("reading {}", path.display())),
    }
    fs::create_dir_all(&folder).io_context(|| format!("creating {}", folder.display()))?;
    write_atomic(&path, SKILL.as_bytes())?;
    say(&format!(
        "ocflow: installed the OpenHands skill in {}; an agent working in {} reads it when a \
         message mentions ocflow",
        path.display(),
        dir.display()
    ));
    Ok(ExitCode::Success)
}

/// Refuses a path that is a symlink: the skill is written only where it appears to go.
fn refuse_symlink(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(Error::Usage(format!(
            "{} is a symlink; ocflow writes its skill only into real directories: remove it, \
             or install elsewhere",
            path.display()
        ))),
        _ => Ok(()),
    }
}

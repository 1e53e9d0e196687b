//! The journal: `journal.jsonl`, an append-only log with one event per line. A crash can tear
//! the last line; readers skip it and the next writer cuts it off before appending.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::{EVENT_VERSION, Record};

/// An open journal, positioned for appending.
pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Opens (or creates) the journal, first cutting off a torn last line.
    pub fn open(path: &Path) -> Result<Journal> {
        let context = || format!("opening the journal {}", path.display());
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .io_context(context)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).io_context(context)?;
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            file.set_len(keep as u64).io_context(context)?;
            file.seek(SeekFrom::End(0)).io_context(context)?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one event as one line and hands it to the kernel; it survives a crash of
    /// ocflow. It is flushed to disk whenever the status is written (`state::save_status`): after a
    /// power loss, what came after the last status write may be lost and is done again.
    pub fn append(&mut self, record: &Record) -> Result<()> {
        let mut line =
            serde_json::to_vec(record).map_err(|err| ocflow_model::error::Error::Io {
                context: "serialising a journal event".into(),
                source: err.into(),
            })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .io_context(|| format!("appending to {}", self.path.display()))?;
        Ok(())
    }
}

/// Reads every whole, well-formed event of this build's version. Lines that do not parse (a
/// torn tail) or carry an older version are skipped and counted; an event of a newer version
/// (a newer ocflow went on with the task) is an error.
pub(crate) fn read(path: &Path) -> Result<(Vec<Record>, usize)> {
    read_from(path, 0)
}

/// The events from byte `offset` on: those a status written when the journal had that length
/// does not include. An offset past the end (a journal cut by hand) reads nothing.
pub(crate) fn read_from(path: &Path, offset: u64) -> Result<(Vec<Record>, usize)> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(err) => return Err(err).io_context(|| format!("reading {}", path.display())),
    };
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .io_context(|| format!("reading {}", path.display()))?;
    }
    let mut records = Vec::new();
    let mut skipped = 0;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.io_context(|| format!("reading {}", path.display()))?;
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) if record.version == EVENT_VERSION => records.push(record),
            _ => {
                if let Some(version) = newer_version(&line) {
                    return Err(Error::BadStateFile {
                        path: path.to_path_buf(),
                        problem: format!(
                            "a journal event of version {version} was written by a newer ocflow \
                             (this one reads version {EVENT_VERSION}): use that version of \
                             ocflow for this task"
                        ),
                    });
                }
                skipped += 1;
            }
        }
    }
    Ok((records, skipped))
}

/// The version of a whole event line written by a newer ocflow, which must be refused rather
/// than skipped: what it records would be missing from the state read without it. A line that
/// is not JSON (a torn tail) is not one.
fn newer_version(line: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    let version = value.get("version")?.as_u64()?;
    (version > u64::from(EVENT_VERSION)).then_some(version)
}

/// The journal's length in bytes (0 when there is none yet).
pub(crate) fn length(path: &Path) -> Result<u64> {
    match File::open(path) {
        Ok(file) => {
            let context = || format!("reading {}", path.display());
            Ok(file.metadata().io_context(context)?.len())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
    }
}

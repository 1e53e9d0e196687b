//! The journal: `journal.jsonl`, an append-only log with one event per line. A crash can tear
//! the last line; readers skip it and the next writer cuts it off before appending.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::model::event::{EVENT_VERSION, Record};

/// An open journal, positioned for appending.
pub(crate) struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Opens (or creates) the journal, first cutting off a torn last line.
    pub(crate) fn open(path: &Path) -> Result<Journal> {
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
    /// ocflow (the status file, not the journal, is what resume trusts after a power loss).
    pub(crate) fn append(&mut self, record: &Record) -> Result<()> {
        let mut line = serde_json::to_vec(record).map_err(|err| crate::error::Error::Io {
            context: "serialising a journal event".into(),
            source: err.into(),
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .io_context(|| format!("appending to {}", self.path.display()))
    }
}

/// Reads every whole, well-formed event of this build's version. Lines that do not parse (a
/// torn tail) or carry another version (written by another ocflow) are skipped and counted.
pub(crate) fn read(path: &Path) -> Result<(Vec<Record>, usize)> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(err) => return Err(err).io_context(|| format!("reading {}", path.display())),
    };
    let mut records = Vec::new();
    let mut skipped = 0;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.io_context(|| format!("reading {}", path.display()))?;
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) if record.version == EVENT_VERSION => records.push(record),
            _ => skipped += 1,
        }
    }
    Ok((records, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Event;

    fn record(step: &str) -> Record {
        Record {
            version: crate::model::event::EVENT_VERSION,
            ts: "2026-11-22T00:00:00Z".into(),
            event: Event::StepStarted {
                step: step.into(),
                operation: "read_file".into(),
                attempt: 1,
                role: None,
                profile: None,
                model: None,
            },
        }
    }

    #[test]
    fn torn_tail_is_skipped_then_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        Journal::open(&path).unwrap().append(&record("a")).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"ts\":\"2026")
            .unwrap();
        let (records, skipped) = read(&path).unwrap();
        assert_eq!((records, skipped), (vec![record("a")], 1));
        Journal::open(&path).unwrap().append(&record("b")).unwrap();
        let (records, skipped) = read(&path).unwrap();
        assert_eq!((records, skipped), (vec![record("a"), record("b")], 0));
    }

    #[test]
    fn lines_carry_the_version_and_other_versions_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        Journal::open(&path).unwrap().append(&record("a")).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.starts_with("{\"version\":1,"), "{written}");
        let newer = written.replace("{\"version\":1,", "{\"version\":2,");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(newer.as_bytes())
            .unwrap();
        let (records, skipped) = read(&path).unwrap();
        assert_eq!((records, skipped), (vec![record("a")], 1));
    }
}

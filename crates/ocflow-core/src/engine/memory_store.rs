//! The failure memory's database: one SQLite file in the user's state directory
//! (`memory.sqlite`), shared by every flow of every repository, each row keyed by its
//! repository. Its schema moves forward by `PRAGMA user_version`; a newer file than this build
//! knows is refused, never misread. WAL mode and a busy timeout let many flows (a batch, one
//! process each) read while one writes, and every write takes the write lock at its start
//! (`BEGIN IMMEDIATE`), so no flow fails with "database is locked" for waiting its turn.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The file's name in the state directory.
pub const MEMORY_FILE: &str = "memory.sqlite";
/// The schema this build writes and reads.
const SCHEMA_VERSION: i64 = 2;
/// How long a write waits for another flow's write: far longer than any one takes.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The migrations, in order: `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE failures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        repo TEXT NOT NULL,
        task_id TEXT NOT NULL,
        task TEXT NOT NULL,
        step TEXT NOT NULL,
        operation TEXT NOT NULL,
        error_class TEXT NOT NULL,
        tests TEXT NOT NULL,
        files TEXT NOT NULL,
        error_lines TEXT NOT NULL,
        strategy TEXT,
        fix TEXT,
        outcome TEXT NOT NULL DEFAULT 'open',
        lesson TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX failures_by_repo ON failures (repo, id);
    CREATE INDEX failures_by_task ON failures (repo, task_id, step);
",
    "
    ALTER TABLE failures ADD COLUMN lesson_checked INTEGER NOT NULL DEFAULT 0;
",
];

/// Why the memory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// SQLite refused (a corrupt file, a full disk, a lock held past the timeout): permanent
    /// for this call; the flow goes on without memory.
    #[error("the failure memory {}: {source}", path.display())]
    Database {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// The state directory could not be made.
    #[error("cannot make the directory of the failure memory {}: {source}", path.display())]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file written by a newer ocflow: refused rather than misread.
    #[error(
        "the failure memory {} has schema version {found}, newer than this ocflow knows \
         ({SCHEMA_VERSION}); update ocflow, or move the file away to start a new memory",
        path.display()
    )]
    Newer { path: PathBuf, found: i64 },
}

/// How a remembered failure ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its flow is still running (or was stopped before it ended).
    Open,
    /// The strategy that followed it ended it: the step succeeded after, or the flow did.
    Fixed,
    /// The step failed again after the strategy, or the flow failed without the step
    /// succeeding.
    NotFixed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Open => "open",
            Outcome::Fixed => "fixed",
            Outcome::NotFixed => "not_fixed",
        }
    }

    fn parse(text: &str) -> Outcome {
        match text {
            "fixed" => Outcome::Fixed,
            "not_fixed" => Outcome::NotFixed,
            _ => Outcome::Open,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure to remember, already normalised and redacted (`memory::Memory` makes it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewFailure {
    pub task_id: String,
    /// The task in the user's words, redacted and bounded.
    pub task: String,
    pub step: String,
    pub operation: String,
    /// The error's class: the exception's type, the first failing test's error type, or the
    /// step error's kind.
    pub error_class: String,
    pub tests: Vec<String>,
    /// The repository paths the step named (none that git ignores).
    pub files: Vec<String>,
    pub error_lines: Vec<String>,
    /// The recovery strategy that followed (`modify`, `retry`…).
    pub strategy: Option<String>,
    /// What that strategy changed: its reason and the changed step, bounded.
    pub fix: Option<String>,
}

/// A remembered failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Remembered {
    pub id: i64,
    pub repo: String,
    pub failure: NewFailure,
    pub outcome: Outcome,
    /// The reflection's two sentences: the root cause and the fix.
    pub lesson: Option<String>,
    /// Whether the flow that taught the lesson verified its fix (its command that must pass
    /// passed at its end): only then is the lesson recalled as a fact.
    pub lesson_checked: bool,
    pub created_at: String,
}

/// An open connection to the memory.
pub struct MemoryStore {
    connection: Connection,
    path: PathBuf,
}

impl MemoryStore {
    /// Opens (creating it, and its directory, if needed) the memory at `path`, migrated to
    /// this build's schema.
    pub fn open(path: &Path) -> Result<MemoryStore, MemoryError> {
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| MemoryError::Directory {
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        let mut store = MemoryStore {
            connection: Connection::open(path).map_err(|source| MemoryError::Database {
                path: path.to_path_buf(),
                source,
            })?,
            path: path.to_path_buf(),
        };
        store.prepare()?;
        Ok(store)
    }

    fn database(&self, source: rusqlite::Error) -> MemoryError {
        MemoryError::Database {
            path: self.path.clone(),
            source,
        }
    }

    /// The busy timeout, WAL mode, and the schema's migrations, each under the write lock so
    /// that flows opening a new file at once migrate it once.
    fn prepare(&mut self) -> Result<(), MemoryError> {
        self.connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.database(e))?;
        // Turning WAL on needs a moment alone with the file; another flow opening it at the
        // same time may answer busy without waiting, so it is asked again.
        let mut tries = 0;
        loop {
            let mode = self
                .connection
                .query_row("PRAGMA journal_mode = WAL", [], |row| {
                    row.get::<_, String>(0)
                });
            match mode {
                Ok(_) => break,
                Err(error) if tries < 100 && is_busy(&error) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => return Err(self.database(error)),
            }
        }
        let path = self.path.clone();
        let database = |source| MemoryError::Database {
            path: path.clone(),
            source,
        };
        // A file already at this schema needs no write lock to be opened: only a migration
        // takes it, so flows that merely recall do not queue behind each other.
        let current: i64 = self
            .connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(database)?;
        if current == SCHEMA_VERSION {
            return Ok(());
        }
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(database)?;
        let version: i64 = transaction
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(database)?;
        if version > SCHEMA_VERSION {
            return Err(MemoryError::Newer {
                path: path.clone(),
                found: version,
            });
        }
        for migration in MIGRATIONS
            .iter()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            transaction.execute_batch(migration).map_err(database)?;
        }
        transaction
            .pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(database)?;
        transaction.commit().map_err(database)
    }

    /// Runs `change` in a transaction that holds the write lock from its start: waiting its
    /// turn behind another flow's write (the busy timeout), never failing midway for it.
    fn write<T>(
        &mut self,
        change: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, MemoryError> {
        let path = self.path.clone();
        let database = |source| MemoryError::Database { path, source };
        let transaction = match self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
        {
            Ok(transaction) => transaction,
            Err(error) => return Err(database(error)),
        };
        match change(&transaction).and_then(|value| transaction.commit().map(|()| value)) {
            Ok(value) => Ok(value),
            Err(error) => Err(database(error)),
        }
    }

    /// Remembers a failure of `repo`; its id. A failure before it of the same step of the same
    /// task that is still open did not end with its strategy: it is marked so.
    pub fn record(&mut self, repo: &str, failure: &NewFailure) -> Result<i64, MemoryError> {
        self.write(|transaction| {
            transaction.execute(
                "UPDATE failures SET outcome = ?1
                 WHERE repo = ?2 AND task_id = ?3 AND step = ?4 AND outcome = 'open'",
                params![
                    Outcome::NotFixed.as_str(),
                    repo,
                    failure.task_id,
                    failure.step
                ],
            )?;
            transaction.execute(
                "INSERT INTO failures (repo, task_id, task, step, operation, error_class, tests,
                     files, error_lines, strategy, fix, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    repo,
                    failure.task_id,
                    failure.task,
                    failure.step,
                    failure.operation,
                    failure.error_class,
                    failure.tests.join("\n"),
                    failure.files.join("\n"),
                    failure.error_lines.join("\n"),
                    failure.strategy,
                    failure.fix,
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                ],
            )?;
            Ok(transaction.last_insert_rowid())
        })
    }

    /// The flow `task_id` ended: its failures still open ended with it. One was fixed when its
    /// step succeeded in the end (in `succeeded_steps`), or when the whole flow succeeded (an
    /// `alternative` or a `replan` ended it by replacing the step); not otherwise. Returns
    /// how many were settled.
    pub fn settle(
        &mut self,
        repo: &str,
        task_id: &str,
        flow_succeeded: bool,
        succeeded_steps: &[String],
    ) -> Result<usize, MemoryError> {
        self.write(|transaction| {
            let mut fixed = 0;
            if flow_succeeded {
                fixed += transaction.execute(
                    "UPDATE failures SET outcome = ?1
                     WHERE repo = ?2 AND task_id = ?3 AND outcome = 'open'",
                    params![Outcome::Fixed.as_str(), repo, task_id],
                )?;
            }
            for step in succeeded_steps {
                fixed += transaction.execute(
                    "UPDATE failures SET outcome = ?1
                     WHERE repo = ?2 AND task_id = ?3 AND step = ?4 AND outcome = 'open'",
                    params![Outcome::Fixed.as_str(), repo, task_id, step],
                )?;
            }
            let not_fixed = transaction.execute(
                "UPDATE failures SET outcome = ?1
                 WHERE repo = ?2 AND task_id = ?3 AND outcome = 'open'",
                params![Outcome::NotFixed.as_str(), repo, task_id],
            )?;
            Ok(fixed + not_fixed)
        })
    }

    /// Writes the reflection's lesson on every failure of flow `task_id`; `checked` when the
    /// flow's fix was verified (it succeeded with a command that must pass passing).
    pub fn teach(
        &mut self,
        repo: &str,
        task_id: &str,
        lesson: &str,
        checked: bool,
    ) -> Result<usize, MemoryError> {
        self.write(|transaction| {
            transaction.execute(
                "UPDATE failures SET lesson = ?1, lesson_checked = ?2
                 WHERE repo = ?3 AND task_id = ?4",
                params![lesson, checked, repo, task_id],
            )
        })
    }

    /// Every failure remembered of `repo` (of every repository with `None`), newest first.
    pub fn list(&self, repo: Option<&str>) -> Result<Vec<Remembered>, MemoryError> {
        self.recent(repo, i64::MAX)
    }

    /// The `limit` newest failures remembered of `repo` (of every repository with `None`),
    /// newest first.
    pub fn recent(&self, repo: Option<&str>, limit: i64) -> Result<Vec<Remembered>, MemoryError> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT {COLUMNS} FROM failures WHERE ?1 IS NULL OR repo = ?1
                 ORDER BY id DESC LIMIT ?2"
            ))
            .map_err(|e| self.database(e))?;
        let rows = statement
            .query_map(params![repo, limit], remembered)
            .map_err(|e| self.database(e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.database(e))
    }

    /// The failures flow `task_id` of `repo` left, oldest first (the index on repository and
    /// task answers it without reading the rest).
    pub fn of_task(&self, repo: &str, task_id: &str) -> Result<Vec<Remembered>, MemoryError> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT {COLUMNS} FROM failures WHERE repo = ?1 AND task_id = ?2 ORDER BY id"
            ))
            .map_err(|e| self.database(e))?;
        let rows = statement
            .query_map(params![repo, task_id], remembered)
            .map_err(|e| self.database(e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.database(e))
    }

    /// The failure `id`, when it is remembered.
    pub fn get(&self, id: i64) -> Result<Option<Remembered>, MemoryError> {
        self.connection
            .query_row(
                &format!("SELECT {COLUMNS} FROM failures WHERE id = ?1"),
                params![id],
                remembered,
            )
            .optional()
            .map_err(|e| self.database(e))
    }

    /// Forgets failure `id`; whether it was there.
    pub fn forget(&mut self, id: i64) -> Result<bool, MemoryError> {
        self.write(|transaction| {
            transaction
                .execute("DELETE FROM failures WHERE id = ?1", params![id])
                .map(|n| n > 0)
        })
    }

    /// Forgets every failure of `repo` (of every repository with `None`); how many.
    pub fn forget_all(&mut self, repo: Option<&str>) -> Result<usize, MemoryError> {
        self.write(|transaction| {
            transaction.execute(
                "DELETE FROM failures WHERE ?1 IS NULL OR repo = ?1",
                params![repo],
            )
        })
    }
}

/// The columns `remembered` reads, in its order.
const COLUMNS: &str = "id, repo, task_id, task, step, operation, error_class, tests, files, \
                       error_lines, strategy, fix, outcome, lesson, created_at, lesson_checked";

fn remembered(row: &rusqlite::Row<'_>) -> rusqlite::Result<Remembered> {
    let lines = |index: usize| -> rusqlite::Result<Vec<String>> {
        let text: String = row.get(index)?;
        Ok(text
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    };
    Ok(Remembered {
        id: row.get(0)?,
        repo: row.get(1)?,
        failure: NewFailure {
            task_id: row.get(2)?,
            task: row.get(3)?,
            step: row.get(4)?,
            operation: row.get(5)?,
            error_class: row.get(6)?,
            tests: lines(7)?,
            files: lines(8)?,
            error_lines: lines(9)?,
            strategy: row.get(10)?,
            fix: row.get(11)?,
        },
        outcome: Outcome::parse(&row.get::<_, String>(12)?),
        lesson: row.get(13)?,
        created_at: row.get(14)?,
        lesson_checked: row.get(15)?,
    })
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(task_id: &str, step: &str) -> NewFailure {
        NewFailure {
            task_id: task_id.into(),
            task: "halve numbers".into(),
            step: step.into(),
            operation: "run_tests".into(),
            error_class: "AssertionError".into(),
            tests: vec!["test_calc.py::test_halve".into()],
            files: vec!["calc.py".into()],
            error_lines: vec!["E AssertionError: assert N == N".into()],
            strategy: Some("modify".into()),
            fix: Some("use floor division".into()),
        }
    }

    #[test]
    fn failures_are_recorded_settled_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/ocflow").join(MEMORY_FILE);
        let mut store = MemoryStore::open(&path).unwrap();
        let first = store.record("commit:a", &failure("t1", "test")).unwrap();
        // The same step failed again: the first strategy did not end it.
        let second = store.record("commit:a", &failure("t1", "test")).unwrap();
        let other = store.record("commit:b", &failure("t2", "test")).unwrap();
        assert_eq!(store.settle("commit:a", "t1", true, &[]).unwrap(), 1);
        assert_eq!(
            store
                .teach("commit:a", "t1", "Halving truncates.", true)
                .unwrap(),
            2
        );
        let listed = store.list(Some("commit:a")).unwrap();
        let ids: Vec<i64> = listed.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![second, first]);
        assert_eq!(listed[0].outcome, Outcome::Fixed);
        assert_eq!(listed[1].outcome, Outcome::NotFixed);
        assert_eq!(listed[1].failure, failure("t1", "test"));
        assert_eq!(listed[0].lesson.as_deref(), Some("Halving truncates."));
        assert_eq!(store.list(None).unwrap().len(), 3);
        let newest: Vec<i64> = store
            .recent(None, 2)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(newest, vec![other, second]);
        // Reopened: the same rows, no migration run twice.
        drop(store);
        let mut store = MemoryStore::open(&path).unwrap();
        assert_eq!(store.get(other).unwrap().unwrap().repo, "commit:b");
        assert!(store.forget(other).unwrap());
        assert!(!store.forget(other).unwrap());
        assert_eq!(store.forget_all(Some("commit:a")).unwrap(), 2);
        assert!(store.list(None).unwrap().is_empty());
    }

    #[test]
    fn a_failed_flow_still_counts_the_steps_it_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = MemoryStore::open(&dir.path().join(MEMORY_FILE)).unwrap();
        let fixed = store.record("commit:a", &failure("t", "test")).unwrap();
        let not_fixed = store.record("commit:a", &failure("t", "lint")).unwrap();
        let settled = store
            .settle("commit:a", "t", false, &["test".to_string()])
            .unwrap();
        assert_eq!(settled, 2);
        assert_eq!(store.get(fixed).unwrap().unwrap().outcome, Outcome::Fixed);
        assert_eq!(
            store.get(not_fixed).unwrap().unwrap().outcome,
            Outcome::NotFixed
        );
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MEMORY_FILE);
        let connection = Connection::open(&path).unwrap();
        connection.pragma_update(None, "user_version", 7).unwrap();
        drop(connection);
        let error = MemoryStore::open(&path).err().unwrap();
        assert!(
            matches!(error, MemoryError::Newer { found: 7, .. }),
            "{error}"
        );
    }

    #[test]
    fn threads_writing_at_once_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MEMORY_FILE);
        let threads: Vec<_> = (0..8)
            .map(|n| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut store = MemoryStore::open(&path).unwrap();
                    for k in 0..20 {
                        store
                            .record("commit:a", &failure(&format!("t{n}"), &format!("s{k}")))
                            .unwrap();
                    }
                    store
                        .settle("commit:a", &format!("t{n}"), n % 2 == 0, &[])
                        .unwrap();
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let store = MemoryStore::open(&path).unwrap();
        assert_eq!(store.list(Some("commit:a")).unwrap().len(), 160);
    }
}

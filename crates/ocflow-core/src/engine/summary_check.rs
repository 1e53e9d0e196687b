//! The model's summary checked against the journal's facts: every sentence that contradicts
//! them — a success claimed for a flow that did not succeed, tests said to run or pass when no
//! command did, something said to be sent, files said to be changed that were not, a step given
//! a state it does not have — struck through, the fact beside it, and listed.

use ocflow_model::event::ContradictedClaim;
use ocflow_model::status::{FlowState, StepState};

/// What the journal says happened, that the model's prose is checked against.
pub(crate) struct Facts<'a> {
    pub(crate) state: FlowState,
    /// The repository files the flow changed.
    pub(crate) changed: &'a [String],
    pub(crate) steps: &'a [StepFact],
}

/// One step as far as the check needs it.
pub(crate) struct StepFact {
    id: String,
    status: StepState,
    attempts: u32,
    /// Its operation runs commands (`run_tests`, `execute_shell_command`, plugins that do).
    runs_commands: bool,
    /// Its operation runs the tests (declared `runs_tests`: `run_tests`).
    runs_tests: bool,
}

impl StepFact {
    pub(crate) fn of(step: &ocflow_model::status::StepStatus) -> StepFact {
        StepFact {
            id: step.id.clone(),
            status: step.status,
            attempts: step.attempts,
            runs_commands: crate::flow::operations::find(&step.operation)
                .is_some_and(|op| op.runs_commands),
            runs_tests: crate::flow::operations::find(&step.operation)
                .is_some_and(|op| op.runs_tests),
        }
    }

    /// Whether it ran at all (a failed attempt counts; pending and skipped do not).
    fn ran(&self) -> bool {
        self.attempts > 0 || matches!(self.status, StepState::Succeeded | StepState::Failed)
    }
}

impl Facts<'_> {
    fn commands(&self) -> impl Iterator<Item = &StepFact> {
        self.steps.iter().filter(|s| s.runs_commands)
    }

    fn commands_ran(&self) -> bool {
        self.commands().any(StepFact::ran)
    }

    fn commands_succeeded(&self) -> bool {
        self.commands().any(|s| s.status == StepState::Succeeded)
    }

    fn step(&self, id: &str) -> Option<&StepFact> {
        self.steps.iter().find(|s| s.id.to_lowercase() == id)
    }
}

/// The model's prose with every sentence that contradicts the facts struck through and the
/// fact beside it, and the list of those sentences: a success claimed for a flow that did not
/// succeed, tests said to have run or passed when no command step ran or passed, something said
/// to be sent or mailed, files said to be changed that the flow did not change, a step given
/// a state it does not have, a number of attempts that is not the flow's.
pub(crate) fn checked(prose: &str, facts: &Facts) -> (String, Vec<ContradictedClaim>) {
    let mut out = String::new();
    let mut contradicted = Vec::new();
    // A list item is read with the heading line above it: "Failed tests:" then "- None".
    let mut heading = String::new();
    for line in prose.lines() {
        let (bullet, item) = split_bullet(line);
        let context = if bullet.is_empty() {
            ""
        } else {
            heading.as_str()
        };
        let mut marked = String::from(bullet);
        // A heading ("Files changed:") says nothing alone: its items are judged with it.
        let is_heading = bullet.is_empty() && line.trim_end().ends_with(':');
        for sentence in sentences(item) {
            let judged = (!is_heading)
                .then(|| contradiction(sentence, context, !bullet.is_empty(), facts))
                .flatten();
            match judged {
                Some(fact) => {
                    let claim = sentence.trim().to_string();
                    marked.push_str(&format!("~~{claim}~~ *(not so: {fact})* "));
                    contradicted.push(ContradictedClaim { claim, fact });
                }
                None => marked.push_str(sentence),
            }
        }
        if bullet.is_empty() && !line.trim().is_empty() {
            heading = if line.trim_end().ends_with(':') {
                line.trim().to_string()
            } else {
                String::new()
            };
        }
        out.push_str(marked.trim_end());
        out.push('\n');
    }
    (out.trim_end().to_string(), contradicted)
}

/// A line's list marker (`- `, `* `, `1. `, with its indent) and the rest.
fn split_bullet(line: &str) -> (&str, &str) {
    let rest = line.trim_start();
    let indent = line.len() - rest.len();
    let marker = if rest.starts_with("- ") || rest.starts_with("* ") {
        2
    } else {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(". ") {
            digits + 2
        } else {
            0
        }
    };
    if marker == 0 {
        ("", line)
    } else {
        line.split_at(indent + marker)
    }
}

/// A line cut after each `. `, `! ` or `? `, keeping the separators.
fn sentences(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        if matches!(bytes[i], b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
            parts.push(&line[start..=i + 1]);
            start = i + 2;
        }
    }
    parts.push(&line[start..]);
    parts
}

/// Words of the model's that say something did not happen ("didn't" is cut at the quote).
const NEGATIONS: &[&str] = &[
    "not",
    "no",
    "never",
    "nothing",
    "none",
    "neither",
    "nor",
    "unchanged",
    "cannot",
    "didn",
    "doesn",
    "wasn",
    "weren",
    "hasn",
    "haven",
    "isn",
    "aren",
    "couldn",
    "won",
];

/// Words that report what was asked rather than what was done.
const REPORTING: &[&str] = &[
    "asked",
    "asks",
    "requested",
    "wants",
    "wanted",
    "should",
    "must",
    "needs",
    "instructed",
];

const TEST_WORDS: &[&str] = &[
    "test",
    "tests",
    "tested",
    "testing",
    "unittest",
    "pytest",
    "unit-tests",
];
const PASS_WORDS: &[&str] = &[
    "pass",
    "passed",
    "passes",
    "passing",
    "succeeded",
    "successful",
    "successfully",
    "green",
];
const FAIL_WORDS: &[&str] = &[
    "fail", "failed", "fails", "failing", "failure", "failures", "error", "errors",
];
const RAN_WORDS: &[&str] = &["ran", "run", "executed", "tested"];
const SENT_WORDS: &[&str] = &[
    "sent",
    "emailed",
    "e-mailed",
    "mailed",
    "delivered",
    "forwarded",
];
/// Words that, beside a mention of mail, make the sentence say something was done with it.
const DONE_WORDS: &[&str] = &[
    "read",
    "received",
    "successfully",
    "done",
    "completed",
    "confirmed",
    "sent",
];
const CHANGE_WORDS: &[&str] = &[
    "created",
    "added",
    "changed",
    "modified",
    "updated",
    "wrote",
    "written",
    "deleted",
    "removed",
    "renamed",
    "fixed",
    "edited",
    "replaced",
    "rewrote",
    "rewritten",
    "implemented",
    "refactored",
    "saved",
];
const STEP_STATES: &[&str] = &["succeeded", "failed", "pending", "skipped", "running"];

/// A sentence's words, lower-case, file names and `snake_case` kept whole.
fn words_of(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')))
        .map(|w| w.trim_matches(|c: char| c == '.' || c == '-'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The fact a sentence contradicts, if any; `heading` is the line above a list `item` ("Failed
/// tests:"), read with it.
fn contradiction(sentence: &str, heading: &str, item: bool, facts: &Facts) -> Option<String> {
    if item && let Some(fact) = step_state_contradiction(&words_of(&sentence.to_lowercase()), facts)
    {
        return Some(fact);
    }
    let lower = format!("{heading} {sentence}").to_lowercase();
    let words = words_of(&lower);
    let has = |list: &[&str]| list.iter().any(|w| words.contains(w));
    let negated = has(NEGATIONS);
    let reporting = has(REPORTING);
    // Tests: "all tests pass", "Failed tests: None", "ran the tests".
    if has(TEST_WORDS) && !reporting {
        let passed = says_none_failed(&words)
            || (has(PASS_WORDS)
                && !has(FAIL_WORDS)
                && !negated
                && !counts_zero(&words, PASS_WORDS));
        let failed_tests: Vec<&str> = facts
            .steps
            .iter()
            .filter(|s| s.runs_tests && s.status == StepState::Failed)
            .map(|s| s.id.as_str())
            .collect();
        if passed && !facts.commands_ran() {
            return Some(NO_COMMAND.to_string());
        }
        if passed && let Some(step) = failed_tests.first() {
            return Some(format!("step {step} ran the tests and they failed"));
        }
        if passed && !facts.commands_succeeded() {
            return Some("no step that ran a command succeeded".to_string());
        }
        if !passed && has(RAN_WORDS) && !negated && !facts.commands_ran() {
            return Some(NO_COMMAND.to_string());
        }
    }
    // Mail: ocflow's own operations send nothing; only a command could have.
    let mail = has(&["email", "e-mail", "mail"]) || lower.split_whitespace().any(is_address);
    let sent = has(SENT_WORDS) || (mail && has(DONE_WORDS));
    if sent && !negated && !reporting && !facts.commands_succeeded() {
        return Some(
            "no step of this flow sent or received anything (it ran no command)".to_string(),
        );
    }
    if has(CHANGE_WORDS) && !negated && !reporting {
        let files: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| looks_like_file(w))
            .collect();
        for file in &files {
            let known = facts.changed.iter().any(|c| {
                let c = c.to_lowercase();
                c == *file || c.rsplit('/').next() == Some(*file)
            });
            if !known {
                return Some(format!("this flow did not change {file}"));
            }
        }
        if files.is_empty() && facts.changed.is_empty() {
            return Some("this flow changed no file".to_string());
        }
    }
    // After the claims above, whose facts say more than "the flow failed".
    if let Some(fact) = success_contradiction(&words, facts) {
        return Some(fact);
    }
    for pair in words.windows(2) {
        if pair[1].starts_with("attempt")
            && let Ok(n) = pair[0].parse::<u32>()
        {
            let total: u32 = facts.steps.iter().map(|s| s.attempts).sum();
            // The flow's attempts, or one step's ("the fix took 2 attempts").
            if n != total && !facts.steps.iter().any(|s| s.attempts == n) {
                return Some(format!("its steps took {total} attempt(s) in all"));
            }
        }
    }
    None
}

/// "No tests failed", "0 failed", "Failed tests: None", "without any failures": a fail word
/// with a word of none within two words of it, and no count of failures above zero ("1
/// failed, 0 passed" says a test failed).
fn says_none_failed(words: &[&str]) -> bool {
    const NONE: &[&str] = &["none", "no", "zero", "0", "without"];
    let fails = |w: &&str| FAIL_WORDS.contains(w);
    let some_failed = words
        .windows(2)
        .any(|pair| fails(&pair[1]) && pair[0].parse::<u64>().is_ok_and(|n| n > 0));
    let none_near = words.iter().enumerate().any(|(i, w)| {
        fails(w)
            && words[i.saturating_sub(2)..(i + 3).min(words.len())]
                .iter()
                .any(|near| NONE.contains(near))
    });
    none_near && !some_failed
}

/// Whether a word of `list` is counted zero ("0 passed").
fn counts_zero(words: &[&str], list: &[&str]) -> bool {
    words
        .windows(2)
        .any(|pair| list.contains(&pair[1]) && matches!(pair[0], "0" | "zero"))
}

const NO_COMMAND: &str = "no step of this flow ran the tests or any command";

/// A success claimed for a flow that did not succeed. "The read step succeeded but the tests
/// failed" is true: only a sentence that claims success and admits no failure is checked, and
/// a success said of a step that succeeded ("The read step succeeded.") is that step's.
fn success_contradiction(words: &[&str], facts: &Facts) -> Option<String> {
    let has = |list: &[&str]| list.iter().any(|w| words.contains(w));
    let claims_success = has(&["succeeded", "successfully", "successful", "success"]);
    let admits_failure = has(&[
        "fail", "failed", "fails", "failure", "error", "errors", "but", "not",
    ]);
    if facts.state == FlowState::Succeeded || !claims_success || admits_failure {
        return None;
    }
    let of_a_step = words.iter().any(|w| {
        facts
            .step(w)
            .is_some_and(|s| s.status == StepState::Succeeded)
    }) || (words.contains(&"step")
        && facts.steps.iter().any(|s| s.status == StepState::Succeeded));
    if of_a_step {
        return None;
    }
    Some(format!("the flow {}", verdict_word(facts.state)))
}

/// A list item copying the prompt's step lines ("test (run_tests): failed") that gives a step
/// a state it does not have, or names a step the flow does not have.
fn step_state_contradiction(words: &[&str], facts: &Facts) -> Option<String> {
    let state_at = words.iter().position(|w| STEP_STATES.contains(w))?;
    let (id, said) = (words.first()?, words[state_at]);
    // The item's own words: "- test (run_tests): failed" with a heading before them is not
    // this form; the id is the item's first word and the state follows within two words.
    if state_at == 0 || state_at > 2 {
        return None;
    }
    let step = facts.step(id)?;
    let actual = step.status.to_string();
    if said == actual {
        return None;
    }
    Some(match step.status {
        StepState::Pending | StepState::Skipped => {
            format!("step {} never ran ({actual})", step.id)
        }
        _ => format!("step {} {actual}", step.id),
    })
}

/// `someone@example.com`, with any punctuation around it.
fn is_address(word: &str) -> bool {
    let word = word.trim_matches(|c: char| !c.is_alphanumeric());
    word.split_once('@').is_some_and(|(user, host)| {
        !user.is_empty() && host.contains('.') && !host.starts_with('.') && !host.ends_with('.')
    })
}

/// A word of the model's that names a file (`utils.py`, not `e.g`).
fn looks_like_file(word: &str) -> bool {
    word.rsplit_once('.').is_some_and(|(stem, ext)| {
        FILE_EXTENSIONS.contains(&ext)
            && !stem.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.chars().all(char::is_alphanumeric)
            && !ext.chars().all(|c| c.is_ascii_digit())
    })
}

/// Extensions that make a word a file name in the model's prose (`e.g` is not one).
const FILE_EXTENSIONS: &[&str] = &[
    "py", "rs", "js", "ts", "tsx", "jsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs",
    "rb", "php", "sh", "md", "txt", "rst", "json", "toml", "yaml", "yml", "ini", "cfg", "html",
    "css", "scss", "sql", "xml", "lock", "swift", "scala",
];

/// The words for a flow's final state in a sentence.
pub(crate) fn verdict_word(state: FlowState) -> &'static str {
    match state {
        FlowState::Succeeded => "succeeded",
        FlowState::Failed => "failed",
        FlowState::Interrupted => "was interrupted",
        FlowState::Running => "is still running",
        FlowState::NoChange => "finished without doing anything the task asked",
        FlowState::Paused => "is paused",
        FlowState::Waiting => "waits for a person's approval",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, operation: &str, status: StepState, attempts: u32) -> StepFact {
        StepFact {
            id: id.into(),
            status,
            attempts,
            runs_commands: crate::flow::operations::find(operation)
                .is_some_and(|op| op.runs_commands),
            runs_tests: crate::flow::operations::find(operation).is_some_and(|op| op.runs_tests),
        }
    }

    fn check(prose: &str, state: FlowState, changed: &[&str], steps: &[StepFact]) -> String {
        checked_with_claims(prose, state, changed, steps).0
    }

    fn checked_with_claims(
        prose: &str,
        state: FlowState,
        changed: &[&str],
        steps: &[StepFact],
    ) -> (String, Vec<ContradictedClaim>) {
        let changed: Vec<String> = changed.iter().map(|c| c.to_string()).collect();
        let facts = Facts {
            state,
            changed: &changed,
            steps,
        };
        checked(prose, &facts)
    }

    /// SmolLM2's real summaries (small-models.md §8), checked against the facts.
    #[test]
    fn claims_that_contradict_the_facts_are_marked() {
        let three = [step("fix", "modify_code", StepState::Failed, 3)];
        let f1 = "The user was asked to fix the code in `utils.py`. It took 150 attempts to \
                  complete the task without any failures.";
        let marked = check(f1, FlowState::Failed, &[], &three);
        assert!(marked.contains("~~It took 150 attempts"), "{marked}");
        assert!(
            marked.contains("its steps took 3 attempt(s) in all"),
            "{marked}"
        );
        let f4 = "The flow succeeded. Files changed: inflection/__init__.py (modified) and \
                  kebabize.py (created).";
        let two = [step("rename", "modify_code", StepState::Failed, 2)];
        let marked = check(f4, FlowState::Failed, &["inflection/__init__.py"], &two);
        assert!(
            marked.contains("~~The flow succeeded.~~ *(not so: the flow failed)*"),
            "{marked}"
        );
        assert!(
            marked.contains("this flow did not change kebabize.py"),
            "{marked}"
        );
        // Updated a file, and said so; a step's success is the step's.
        let steps = [
            step("read", "read_file", StepState::Succeeded, 1),
            step("test", "run_tests", StepState::Failed, 1),
        ];
        let true_for_a_failure = "The read step succeeded but the tests failed. Updated \
                                  parse(), e.g. for spaces.";
        assert_eq!(
            check(true_for_a_failure, FlowState::Failed, &["parse.py"], &steps),
            true_for_a_failure
        );
        let read_alone = "The read step succeeded. The test step failed.";
        assert_eq!(
            check(read_alone, FlowState::Failed, &[], &steps),
            read_alone
        );
        let tested = [
            step("fix", "modify_code", StepState::Succeeded, 1),
            step("test", "run_tests", StepState::Succeeded, 1),
        ];
        let honest = "Added a check for empty lists to `utils.py`. All 2 tests pass.";
        assert_eq!(
            check(honest, FlowState::Succeeded, &["utils.py"], &tested),
            honest
        );
    }

    /// Issue 24: SmolLM2's f1 summary of a flow whose fix failed and whose tests never ran
    /// (small-models.md §8), in the list form it wrote.
    #[test]
    fn tests_said_to_run_or_fail_when_they_never_ran_are_marked() {
        let steps = [
            step("fix", "modify_code", StepState::Failed, 2),
            step("test", "run_tests", StepState::Pending, 0),
        ];
        let f1 = "The user was asked to fix the code in `utils.py` …\n\
                  - test (run_tests): failed — the tests did not pass\n\
                  - test (test_run_tests) failed — it took 150 attempts to complete the task \
                  without any failures.";
        let (marked, claims) = checked_with_claims(f1, FlowState::Failed, &[], &steps);
        let lines: Vec<&str> = marked.lines().collect();
        assert_eq!(
            lines[0],
            "The user was asked to fix the code in `utils.py` …"
        );
        assert!(
            lines[1].starts_with("- ~~test (run_tests): failed")
                && lines[1].contains("*(not so: step test never ran (pending))*"),
            "{marked}"
        );
        assert!(
            lines[2].contains("*(not so: step test never ran (pending))*"),
            "{marked}"
        );
        assert_eq!(claims.len(), 2, "{claims:?}");
        assert_eq!(claims[1].fact, "step test never ran (pending)");
    }

    /// Issue 24: Qwen2.5-Coder's summary of a flow that only read mathx.py: "Failed tests:
    /// None", as one line and as a list; and plain claims that the tests passed or ran.
    #[test]
    fn tests_said_to_pass_when_no_command_ran_are_marked() {
        let read_only = [step("read_file", "read_file", StepState::Succeeded, 1)];
        for qwen in [
            "Failed tests: - None",
            "Failed tests:\n- None",
            "All tests passed.",
            "The tests pass now.",
            "No tests failed.",
            "I ran the tests.",
        ] {
            let (marked, claims) = checked_with_claims(qwen, FlowState::Succeeded, &[], &read_only);
            assert!(
                marked.contains("*(not so: no step of this flow ran the tests or any command)*"),
                "{qwen}: {marked}"
            );
            assert_eq!(claims.len(), 1, "{qwen}: {claims:?}");
        }
        let tests_failed = [
            step("fix", "modify_code", StepState::Succeeded, 1),
            step("check", "run_tests", StepState::Failed, 1),
        ];
        let marked = check(
            "Fixed mathx.py. All tests passed.",
            FlowState::Failed,
            &["mathx.py"],
            &tests_failed,
        );
        assert!(
            marked.contains(
                "Fixed mathx.py. ~~All tests passed.~~ *(not so: step check ran the \
                             tests and they failed)*"
            ),
            "{marked}"
        );
        // True sentences about tests stay as they are.
        for true_one in [
            "The tests were not run.",
            "No test was run: the plan only read mathx.py.",
            "The task asked to run the tests with unittest.",
        ] {
            assert_eq!(
                check(true_one, FlowState::Succeeded, &[], &read_only),
                true_one
            );
        }
        let ran = [step("test", "run_tests", StepState::Succeeded, 1)];
        for true_one in [
            "All tests passed.",
            "Failed tests: - None",
            "Ran the tests.",
        ] {
            assert_eq!(check(true_one, FlowState::Succeeded, &[], &ran), true_one);
        }
        for true_one in [
            "The tests failed.",
            "Test results: 0 passed, 1 failed.",
            "1 failed, 0 passed: the last window is still missing.",
        ] {
            assert_eq!(
                check(true_one, FlowState::Failed, &[], &tests_failed),
                true_one
            );
        }
    }

    /// Issue 24: Qwen's summary of "Email report.csv to alice@example.com" planned as one read.
    #[test]
    fn something_said_to_be_sent_is_marked() {
        let read = [step("read_report", "read_file", StepState::Succeeded, 1)];
        for claim in [
            "The email report.csv file was successfully read from Alice@example.com.",
            "The report was sent to alice@example.com.",
            "Emailed report.csv to Alice.",
        ] {
            let (marked, claims) = checked_with_claims(claim, FlowState::Succeeded, &[], &read);
            assert!(
                marked.starts_with("~~") && marked.contains("sent or received anything"),
                "{claim}: {marked}"
            );
            assert_eq!(claims[0].claim, claim);
        }
        for true_one in [
            "The task asked to email report.csv to alice@example.com.",
            "ocflow cannot send email; it read report.csv.",
            "The report was not sent.",
            "Read report.csv (3 lines).",
        ] {
            assert_eq!(check(true_one, FlowState::Succeeded, &[], &read), true_one);
        }
    }

    /// Issue 24: changes claimed by a flow that changed nothing.
    #[test]
    fn changes_claimed_by_a_flow_that_changed_nothing_are_marked() {
        let read = [step("read", "read_file", StepState::Succeeded, 1)];
        for claim in [
            "Fixed the off-by-one in moving_average.",
            "Files changed:\n- mathx.py (modified)",
            "The code was updated to keep the last window.",
        ] {
            let (marked, claims) = checked_with_claims(claim, FlowState::NoChange, &[], &read);
            assert_eq!(claims.len(), 1, "{claim}: {marked}");
            assert!(
                claims[0].fact == "this flow changed no file"
                    || claims[0].fact == "this flow did not change mathx.py",
                "{claims:?}"
            );
        }
        for true_one in [
            "Files changed: none.",
            "No file was changed.",
            "mathx.py was not modified.",
            "Read mathx.py; it is unchanged.",
            "The user asked for moving_average to be fixed.",
        ] {
            assert_eq!(check(true_one, FlowState::NoChange, &[], &read), true_one);
        }
        // A file the flow did change, named as changed: true.
        let fixed = [step("fix", "modify_code", StepState::Succeeded, 2)];
        let honest = "Fixed moving_average in mathx.py; the fix took 2 attempts.";
        assert_eq!(
            check(honest, FlowState::Succeeded, &["mathx.py"], &fixed),
            honest
        );
    }

    /// Summaries a model could honestly write, of a flow that fixed utils.py and ran its
    /// tests, and of one whose fix failed: nothing in them is marked.
    #[test]
    fn honest_summaries_are_left_alone() {
        let fixed = [
            step("read", "read_file", StepState::Succeeded, 1),
            step("fix", "modify_code", StepState::Succeeded, 1),
            step("test", "run_tests", StepState::Succeeded, 1),
        ];
        let of_the_fix = [
            "The flow succeeded. The `fix` step modified utils.py to handle empty lists, and \
             the tests passed.",
            "**What was achieved:** calculate_metrics in utils.py now returns zeros for an \
             empty list.\n\n**Files changed:**\n- utils.py (modified)\n\n**Failures:** none.",
            "All steps succeeded: read (read_file), fix (modify_code), test (run_tests).",
            "- read (read_file): succeeded — read 12 lines\n- fix (modify_code): succeeded — \
             rewrote utils.py\n- test (run_tests): succeeded — 3 passed",
            "No errors occurred. 3 tests passed, 0 failed.",
            "The tests were run with pytest and all passed.",
            "Files changed:\n- utils.py (modified)\n\nNothing failed.",
            "### Summary\nThe task was completed successfully. `utils.py` was updated.",
        ];
        for text in of_the_fix {
            let (marked, claims) =
                checked_with_claims(text, FlowState::Succeeded, &["utils.py"], &fixed);
            assert!(claims.is_empty(), "{claims:?}");
            assert_eq!(marked, text);
        }
        let failed = [
            step("read", "read_file", StepState::Succeeded, 1),
            step("fix", "modify_code", StepState::Failed, 2),
            step("test", "run_tests", StepState::Pending, 0),
        ];
        let of_the_failure = [
            "The flow did not succeed. The fix step failed: the LLM gave no usable content for \
             utils.py. The tests were not run. No files were changed.",
            "The `fix` step failed after 2 attempts, so utils.py was left unchanged.",
            "- read (read_file): succeeded — read 12 lines\n- fix (modify_code): failed — no \
             usable content\n- test (run_tests): pending",
            "Files changed: none",
            "The read step succeeded. The file utils.py was read successfully.",
            "The flow failed because the model could not produce valid code for utils.py.",
        ];
        for text in of_the_failure {
            let (marked, claims) = checked_with_claims(text, FlowState::Failed, &[], &failed);
            assert!(claims.is_empty(), "{claims:?}");
            assert_eq!(marked, text);
        }
    }
}

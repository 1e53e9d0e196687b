//! A failure made comparable across runs: its error lines and test names normalised so that
//! where the repository lay (`/tmp/x/repo/calc.py`), line numbers, addresses and durations do
//! not matter, and the words left over compared by overlap. The failure memory stores the
//! normalised text and recalls the past failures whose words are nearest.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

/// Error lines kept of one failure, and the characters of each.
const MAX_ERROR_LINES: usize = 12;
const MAX_LINE_CHARS: usize = 200;

/// Paths with at least one slash: only their last component (the file's name) is kept.
static PATH: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?:[A-Za-z]:)?(?:[\w.~@+-]*/)+([\w.@+-]+)").ok());
/// Hexadecimal addresses and hashes, then any other number.
static HEX: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\b0x[0-9a-fA-F]+\b").ok());
static NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").ok());
/// Words of a normalised text, for comparing two failures.
static WORD: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"[A-Za-z_][\w.]*").ok());
/// A line that says what went wrong: an exception, an assertion, a failing test, a compiler's
/// or a tool's error.
static ERROR_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(error|exception|assert|failed|failure|fatal|panicked|traceback|",
        r"not found|no such|cannot|undefined|expected)"
    ))
    .ok()
});

/// `text` with paths cut to their file name, numbers and addresses replaced by `N`, and runs
/// of blanks made one space.
pub fn normalise(text: &str) -> String {
    let mut text = text.to_string();
    if let Some(path) = &*PATH {
        text = path.replace_all(&text, "$1").into_owned();
    }
    for pattern in [&*HEX, &*NUMBER].into_iter().flatten() {
        text = pattern.replace_all(&text, "N").into_owned();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of a command's output that say what went wrong, normalised, each once, in order,
/// at most `MAX_ERROR_LINES`; the last lines when none looks like an error.
pub fn error_lines(output: &str) -> Vec<String> {
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let erroneous: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|line| ERROR_LINE.as_ref().is_some_and(|re| re.is_match(line)))
        .collect();
    let chosen = if erroneous.is_empty() {
        lines[lines.len().saturating_sub(3)..].to_vec()
    } else {
        erroneous
    };
    let mut seen = BTreeSet::new();
    chosen
        .into_iter()
        .map(|line| bounded(&normalise(line), MAX_LINE_CHARS))
        .filter(|line| seen.insert(line.clone()))
        .take(MAX_ERROR_LINES)
        .collect()
}

/// The failing tests' names from the evidence lines (`name — kind: message`), with their
/// paths cut as `normalise` does: `tests/test_calc.py::test_div` is `test_calc.py::test_div`.
/// A stand-in until the runner's report parser is shared: it reads the evidence's own form.
pub fn test_names(failures: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    failures
        .iter()
        .filter_map(|line| line.split(" — ").next())
        .map(|name| normalise(name.trim()))
        .filter(|name| !name.is_empty() && name != "?")
        .filter(|name| seen.insert(name.clone()))
        .collect()
}

/// The words of a normalised failure, lower-cased, for comparing it with another.
pub fn words(text: &str) -> BTreeSet<String> {
    let Some(word) = &*WORD else {
        return BTreeSet::new();
    };
    word.find_iter(text)
        .map(|m| m.as_str().trim_end_matches('.').to_ascii_lowercase())
        .filter(|w| w.len() > 1)
        .collect()
}

/// How alike two failures' words are: the share of their words they have in common
/// (Jaccard), 0 for nothing in common, 1 for the same words.
pub fn similarity(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// `text` cut to `max` characters, marked when cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_numbers_do_not_matter() {
        let first = "  File \"/tmp/a1/repo/src/calc.py\", line 12, in halve\nAssertionError: \
                     assert 3.5 == 3";
        let second = "  File \"/home/me/work/calc/src/calc.py\", line 40, in halve\n\
                      AssertionError: assert 8.5 == 8";
        assert_eq!(normalise(first), normalise(second));
        assert_eq!(
            normalise("at 0x7f3a2b in /usr/lib/x.so after 12.5s"),
            "at N in x.so after Ns"
        );
    }

    #[test]
    fn error_lines_are_the_lines_that_say_what_went_wrong() {
        let output = "collected 3 items\n\ntest_calc.py ..F\nE   AssertionError: assert 3.5 \
                      == 3\nFAILED tests/test_calc.py::test_halve - AssertionError\n1 failed in \
                      0.03s\nE   AssertionError: assert 3.5 == 3\n";
        assert_eq!(
            error_lines(output),
            vec![
                "E AssertionError: assert N == N",
                "FAILED test_calc.py::test_halve - AssertionError",
                "N failed in Ns",
            ]
        );
        // Nothing that looks like an error: the last lines.
        assert_eq!(
            error_lines("one\ntwo\nthree\nfour"),
            vec!["two", "three", "four"]
        );
    }

    #[test]
    fn test_names_come_from_the_evidence_lines() {
        let failures = vec![
            "tests/test_calc.py::test_halve — AssertionError: assert 3.5 == 3".to_string(),
            "? — ?: ?".to_string(),
            "tests/test_calc.py::test_halve — AssertionError: again".to_string(),
        ];
        assert_eq!(test_names(&failures), vec!["test_calc.py::test_halve"]);
    }

    #[test]
    fn the_same_failure_is_nearer_than_another() {
        let failure = words("E AssertionError: assert N == N test_calc.py::test_halve");
        let same = words("E AssertionError: assert N == N test_calc.py::test_halve");
        let other = words("ModuleNotFoundError: No module named requests");
        assert_eq!(similarity(&failure, &same), 1.0);
        assert!(similarity(&failure, &other) < 0.1);
        assert_eq!(similarity(&BTreeSet::new(), &BTreeSet::new()), 0.0);
    }
}

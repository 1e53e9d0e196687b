//! The one way a prompt's placeholders are filled: every prompt of `prompts/` (`{{name}}`) and
//! every goal line of `operations.json` (`{name}`, as plugins declare theirs) goes through
//! [`fill`]. One pass from left to right: a value put in (the user's task, a file's content, a
//! step's parameters) is never read as a template itself, so a task that says `{{params}}` stays
//! the user's words. Chained `str::replace` calls did read it: the task was put in first and
//! a later placeholder rewrote it.

/// How placeholders are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Braces {
    /// `{{name}}`: the prompts in `prompts/`.
    Double,
    /// `{name}`, a name of lowercase letters, digits and `_`: the goal lines of an operation.
    Single,
}

impl Braces {
    fn delimiters(self) -> (&'static str, &'static str) {
        match self {
            Braces::Double => ("{{", "}}"),
            Braces::Single => ("{", "}"),
        }
    }
}

/// `template` with each placeholder whose name `value` knows replaced by its value, in one
/// pass. A placeholder `value` does not know (`None`), and a brace that opens no placeholder,
/// stay as they are written.
pub fn fill(template: &str, braces: Braces, value: impl Fn(&str) -> Option<String>) -> String {
    let (open, close) = braces.delimiters();
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        let filled = after.find(close).and_then(|end| {
            let name = &after[..end];
            is_name(name)
                .then(|| value(name))
                .flatten()
                .map(|v| (v, end))
        });
        match filled {
            Some((text, end)) => {
                out.push_str(&text);
                rest = &after[end + close.len()..];
            }
            None => {
                out.push_str(open);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `template` filled from `(name, value)` pairs ([`fill`] with double braces).
pub fn fill_with(template: &str, values: &[(&str, &str)]) -> String {
    fill(template, Braces::Double, |name| {
        values
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_string())
    })
}

/// The placeholders `template` holds, in order, each once: what a test compares with the
/// values a prompt is given, so that none is left unfilled.
pub fn placeholders(template: &str, braces: Braces) -> Vec<String> {
    let (open, close) = braces.delimiters();
    let mut found: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find(open) {
        let after = &rest[start + open.len()..];
        match after.find(close) {
            Some(end) if is_name(&after[..end]) => {
                let name = after[..end].to_string();
                if !found.contains(&name) {
                    found.push(name);
                }
                rest = &after[end + close.len()..];
            }
            _ => rest = after,
        }
    }
    found
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_never_read_as_a_template() {
        let template = "Task: {{task}}\nParams: {{params}}";
        let filled = fill_with(
            template,
            &[("task", "say {{params}} aloud"), ("params", "x")],
        );
        assert_eq!(filled, "Task: say {{params}} aloud\nParams: x");
    }

    #[test]
    fn unknown_placeholders_and_stray_braces_stay() {
        let filled = fill_with("{{a}} {{b}} {{ {{A}} {{", &[("a", "1")]);
        assert_eq!(filled, "1 {{b}} {{ {{A}} {{");
    }

    #[test]
    fn single_braces_fill_goal_lines_and_leave_json_alone() {
        let filled = fill(
            "Change `{file_path}`: {\"x\": 1} {}",
            Braces::Single,
            |name| (name == "file_path").then(|| "a.py".to_string()),
        );
        assert_eq!(filled, "Change `a.py`: {\"x\": 1} {}");
    }

    #[test]
    fn placeholders_are_listed_once_in_order() {
        assert_eq!(
            placeholders("{{b}} {{a}} {{b}} {{not one}}", Braces::Double),
            ["b", "a"]
        );
    }
}

//! How a duration and a step's start are worded at the terminal, the same in the plain lines
//! (`progress`), the live display (`live`) and the run's end (`ending`).

/// A duration for people: `850 ms`, `12.4 s`, `3 min 5 s`.
pub(crate) fn seconds(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
    }
}

/// What a step's start says: `fix modify_code as coder (attempt 2)`.
pub(crate) fn started_label(
    step: &str,
    operation: &str,
    attempt: u32,
    role: Option<&str>,
) -> String {
    let by = role.map(|r| format!(" as {r}")).unwrap_or_default();
    let again = if attempt > 1 {
        format!(" (attempt {attempt})")
    } else {
        String::new()
    };
    format!("{step} {operation}{by}{again}")
}

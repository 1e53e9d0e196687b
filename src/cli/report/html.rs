//! Escaping for the report: everything a task holds (step ids, messages, the task, file
//! contents) is untrusted — a repository or a model may write `<script>` — and reaches the
//! page only through `escape`.

/// `text` safe inside an element or a quoted attribute: the five characters HTML gives meaning
/// to become entities, so no markup, attribute or script can start from it.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `text`, with an ellipsis when cut (labels in the graph have a
/// fixed width; the full text is in the node's tooltip).
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept + "…"
}

/// A duration for people: `320 ms`, `4.2 s`, `3 min 05 s`.
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {:02} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup_and_keeps_the_text() {
        assert_eq!(
            escape(r#"<script>alert("x" + 'y')</script> & co"#),
            "&lt;script&gt;alert(&quot;x&quot; + &#39;y&#39;)&lt;/script&gt; &amp; co"
        );
        assert_eq!(
            escape("&lt;"),
            "&amp;lt;",
            "an entity is text, not an entity"
        );
        assert_eq!(escape("plain ünïcode ✓"), "plain ünïcode ✓");
        let attribute = escape(r#"" onmouseover="alert(1)"#);
        assert!(!attribute.contains('"'), "{attribute}");
    }

    #[test]
    fn shorten_cuts_by_characters_not_bytes() {
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("ééééé", 4), "ééé…");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(320), "320 ms");
        assert_eq!(duration(4_240), "4.2 s");
        assert_eq!(duration(185_000), "3 min 05 s");
    }
}

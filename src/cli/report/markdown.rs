//! Just enough Markdown for `summary.md`, which ocflow or a model writes: headings, bullet
//! lists, fenced code, paragraphs and `code` spans. Every piece of text is escaped first, so
//! the summary can hold anything without becoming markup.

use super::html::escape;

/// The block being built.
#[derive(PartialEq)]
enum Block {
    None,
    Paragraph,
    List,
    Code,
}

/// `text` as HTML.
pub(crate) fn render(text: &str) -> String {
    let mut out = String::new();
    let mut block = Block::None;
    for line in text.lines() {
        if block == Block::Code {
            if line.trim_start().starts_with("```") {
                close(&mut out, &mut block);
            } else {
                out.push_str(&escape(line));
                out.push('\n');
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            close(&mut out, &mut block);
            out.push_str("<pre>");
            block = Block::Code;
        } else if trimmed.is_empty() {
            close(&mut out, &mut block);
        } else if let Some((level, heading)) = heading(trimmed) {
            close(&mut out, &mut block);
            out.push_str(&format!("<h{level}>{}</h{level}>\n", inline(heading)));
        } else if let Some(item) = trimmed.strip_prefix("- ").or(trimmed.strip_prefix("* ")) {
            if block != Block::List {
                close(&mut out, &mut block);
                out.push_str("<ul>\n");
                block = Block::List;
            }
            out.push_str(&format!("<li>{}</li>\n", inline(item)));
        } else {
            if block != Block::Paragraph {
                close(&mut out, &mut block);
                out.push_str("<p>");
                block = Block::Paragraph;
            } else {
                out.push('\n');
            }
            out.push_str(&inline(trimmed));
        }
    }
    close(&mut out, &mut block);
    out
}

fn close(out: &mut String, block: &mut Block) {
    out.push_str(match block {
        Block::None => "",
        Block::Paragraph => "</p>\n",
        Block::List => "</ul>\n",
        Block::Code => "</pre>\n",
    });
    *block = Block::None;
}

/// `# Title` is the page's third level (the report has its own first two).
fn heading(line: &str) -> Option<(usize, &str)> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    let rest = line[hashes..].strip_prefix(' ')?;
    (1..=6)
        .contains(&hashes)
        .then(|| ((hashes + 2).min(6), rest))
}

/// Escaped text with `code` spans; an unpaired backtick stays a backtick.
fn inline(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return escape(text);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{}</code>", escape(part))
            } else {
                escape(part)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_summary_shapes_and_escapes_everything() {
        let text = "# Fix <b>it</b>\n\nThe flow `t` failed.\nSee below.\n\n## Steps\n\n\
                    - `a` ok\n- <script>x</script>\n\n```\nfn <T>() {}\n```\nodd ` tick";
        assert_eq!(
            render(text),
            "<h3>Fix &lt;b&gt;it&lt;/b&gt;</h3>\n<p>The flow <code>t</code> failed.\nSee \
             below.</p>\n<h4>Steps</h4>\n<ul>\n<li><code>a</code> ok</li>\n<li>&lt;script&gt;x\
             &lt;/script&gt;</li>\n</ul>\n<pre>fn &lt;T&gt;() {}\n</pre>\n<p>odd ` tick</p>\n"
        );
    }
}

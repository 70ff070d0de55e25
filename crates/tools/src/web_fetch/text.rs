//! A plain-text fallback for HTML the markdown converter is not given (too
//! deep or too slow to parse): one linear pass that drops tags, skips the
//! content of scripts and styles, and decodes the common entities.

pub(crate) fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        push_text(&mut out, &rest[..lt]);
        let after = &rest[lt + 1..];
        if let Some(comment) = after.strip_prefix("!--") {
            rest = comment.find("-->").map_or("", |end| &comment[end + 3..]);
            continue;
        }
        let Some(gt) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = &after[..gt];
        rest = &after[gt + 1..];
        let closing = tag.starts_with('/');
        let name = tag
            .trim_start_matches('/')
            .split(|c: char| c.is_ascii_whitespace() || c == '/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !closing && super::html::SKIPPED.contains(&name.as_str()) {
            rest = skip_past_end_tag(rest, &name);
        }
        if super::html::is_block(&name) && !out.ends_with('\n') {
            out.push('\n');
        }
    }
    push_text(&mut out, rest);
    out.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What follows `</name ...>`, or nothing if it never closes.
fn skip_past_end_tag<'a>(rest: &'a str, name: &str) -> &'a str {
    let needle = format!("</{name}");
    let found = rest
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle.as_bytes()));
    match found {
        Some(start) => {
            let tail = &rest[start..];
            tail.find('>').map_or("", |gt| &tail[gt + 1..])
        }
        None => "",
    }
}

/// Append text with its whitespace collapsed and entities decoded.
fn push_text(out: &mut String, text: &str) {
    for word in decode_entities(text).split_whitespace() {
        if !out.is_empty() && !out.ends_with(['\n', ' ']) {
            out.push(' ');
        }
        out.push_str(word);
    }
}

fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let entity = after
            .find(';')
            .filter(|&end| end <= 10)
            .and_then(|end| decode_entity(&after[..end]).map(|c| (c, end)));
        match entity {
            Some((decoded, end)) => {
                out.push(decoded);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn decode_entity(name: &str) -> Option<char> {
    let code = |digits: &str, radix| u32::from_str_radix(digits, radix).ok();
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => {
            let number = name.strip_prefix('#')?;
            let value = match number.strip_prefix(['x', 'X']) {
                Some(hex) => code(hex, 16),
                None => code(number, 10),
            }?;
            char::from_u32(value)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tags_go_and_text_stays() {
        let text = strip_tags(
            "<html><head><title>T</title></head><body><h1>Head &amp; line</h1>\
             <p>One <b>bold</b> word.</p><!-- hidden --><SCRIPT>evil()</script >\
             <p>caf&#233; &#x263A; &bogus; a&b <div>x</div>",
        );
        assert_eq!(text, "Head & line\nOne bold word.\ncafé ☺ &bogus; a&b\nx");
    }

    #[test]
    fn unterminated_input_ends_cleanly() {
        assert_eq!(strip_tags("a <script>never closed"), "a");
        assert_eq!(strip_tags("a <b"), "a");
        assert_eq!(strip_tags("a <!-- open"), "a");
    }
}

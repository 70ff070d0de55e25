//! HTML to readable markdown, without scripts, styles or inline images.
use std::rc::Rc;
use std::time::{Duration, Instant};

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::{Element, HtmlToMarkdown, Node};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::TreeBuilderOpts;
use html5ever::{ParseOpts, parse_document};
use markup5ever_rcdom::RcDom;

use super::text::strip_tags;

/// Elements whose content is never shown (nor kept by the plain-text fallback).
pub(crate) const SKIPPED: [&str; 6] = ["script", "style", "noscript", "template", "svg", "head"];

/// Deeper documents are not given to the markdown converter, which recurses
/// once per level and would overflow the stack.
const MAX_DEPTH: usize = 512;
/// Stack of the conversion thread: an unoptimized build needs ~2 MiB at
/// `MAX_DEPTH`; the rest is headroom (only touched pages are committed).
const STACK_BYTES: usize = 32 * 1024 * 1024;

/// The parser's work grows with nesting depth times tags (quadratic for
/// hostile pages), so it is fed in pieces and given up on after this long.
const PARSE_BUDGET: Duration = Duration::from_secs(10);
const PARSE_PIECE: usize = 16 * 1024;

const FALLBACK_NOTE: &str =
    "[the page is too deeply nested or too complex to convert to markdown; its text follows]";

/// [`to_markdown`] on a thread of its own with a stack big enough for it.
pub(crate) async fn to_markdown_on_thread(html: String) -> String {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("webfetch-html".to_string())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let _ = sender.send(to_markdown(&html));
        });
    match spawned {
        Ok(_) => receiver
            .await
            .unwrap_or_else(|_| "[the page could not be converted to text]".to_string()),
        Err(err) => format!("[the page could not be converted to text: {err}]"),
    }
}

/// Convert an HTML document to markdown, or to plain text if it is too
/// complex to parse in time or nests too deeply.
pub(crate) fn to_markdown(html: &str) -> String {
    convert(html, PARSE_BUDGET)
}

fn convert(html: &str, budget: Duration) -> String {
    let converter = HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .add_handler(vec!["img"], image)
        .build();
    match parse(html, budget) {
        Some(tree) if depth(&tree) <= MAX_DEPTH => {
            collapse_blank_lines(&converter.tree_to_markdown(&tree))
        }
        _ => format!("{FALLBACK_NOTE}\n\n{}", strip_tags(html)),
    }
}

/// Parse like `htmd` does, but stop once `budget` is spent.
fn parse(html: &str, budget: Duration) -> Option<Rc<Node>> {
    let deadline = Instant::now() + budget;
    let options = ParseOpts {
        tree_builder: TreeBuilderOpts {
            scripting_enabled: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut parser = parse_document(RcDom::default(), options);
    let mut rest = html;
    while !rest.is_empty() {
        let mut cut = rest.len().min(PARSE_PIECE);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        parser.process(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
        if Instant::now() > deadline {
            return None;
        }
    }
    Some(parser.finish().document)
}

/// Inline `data:` images are base64 noise to a reader: keep only their alt text.
fn image(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let attr = |name: &str| {
        element
            .attrs
            .iter()
            .find(|attr| &*attr.name.local == name)
            .map(|attr| attr.value.to_string())
    };
    if attr("src").is_some_and(|src| src.trim_start().starts_with("data:")) {
        let alt = attr("alt").unwrap_or_default();
        return (!alt.trim().is_empty()).then(|| format!("[image: {}]", alt.trim()).into());
    }
    handlers.fallback(element)
}

/// The deepest nesting of the tree, counted without recursion.
fn depth(root: &Rc<Node>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(Rc::clone(root), 0usize)];
    while let Some((node, level)) = stack.pop() {
        deepest = deepest.max(level);
        for child in node.children.borrow().iter() {
            stack.push((Rc::clone(child), level + 1));
        }
    }
    deepest
}

/// Elements that start a new line in the plain-text fallback.
const BLOCKS: &str =
    "p div br li tr h1 h2 h3 h4 h5 h6 pre blockquote section article table ul ol hr";

pub(crate) fn is_block(tag: &str) -> bool {
    BLOCKS.split(' ').any(|block| block == tag)
}

/// At most one empty line in a row.
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        blank_run = if line.is_empty() { blank_run + 1 } else { 0 };
        if blank_run <= 1 {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn html_becomes_markdown() {
        let md = to_markdown(
            "<html><head><title>T</title><style>p{color:red}</style></head><body>\
             <h1>Title</h1><p>Some <a href=\"https://example.com/x\">link</a>.</p>\
             <script>var secret = 1;</script><ul><li>one</li><li>two</li></ul>\
             <img src=\"data:image/png;base64,AAAA\" alt=\"logo\"><img src=\"/a.png\" alt=\"pic\">\
             </body></html>",
        );
        assert!(md.contains("# Title"), "{md}");
        assert!(md.contains("[link](https://example.com/x)"), "{md}");
        assert!(md.contains("one") && md.contains("two"), "{md}");
        assert!(
            md.contains("[image: logo]") && md.contains("![pic](/a.png)"),
            "{md}"
        );
        assert!(!md.contains("secret") && !md.contains("color"), "{md}");
        assert!(!md.contains("base64"), "{md}");
    }

    #[test]
    fn deep_nesting_falls_back_to_text() {
        let levels = 2_000;
        let html = format!(
            "<h1>Deep</h1>{}<p>bottom</p><script>hidden()</script>{}",
            "<div>".repeat(levels),
            "</div>".repeat(levels)
        );
        let text = to_markdown(&html);
        assert!(text.starts_with(FALLBACK_NOTE), "{text}");
        assert!(text.contains("Deep") && text.contains("bottom"), "{text}");
        assert!(!text.contains("hidden"), "{text}");
    }

    #[test]
    fn slow_parses_are_abandoned() {
        let html = format!("{}<p>end</p>", "<div>".repeat(200_000));
        let started = Instant::now();
        let text = convert(&html, Duration::from_millis(200));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            text.starts_with(FALLBACK_NOTE) && text.ends_with("end"),
            "{text}"
        );
    }

    #[test]
    fn nesting_at_the_limit_converts() {
        // Each element kind recurses differently in the converter; all must
        // fit a quarter of the conversion thread's stack at the depth limit.
        for (open, close) in [
            ("<div>", "</div>"),
            ("<ul><li>", "</li></ul>"),
            ("<blockquote>", "</blockquote>"),
            ("<table><tr><td>", "</td></tr></table>"),
            ("<a href=\"/x\"><span>", "</span></a>"),
            ("<pre><code>", "</code></pre>"),
        ] {
            let levels = MAX_DEPTH / open.matches('<').count() - 5;
            let html = format!("{}<b>deep</b>{}", open.repeat(levels), close.repeat(levels));
            let text = std::thread::Builder::new()
                .stack_size(STACK_BYTES / 4)
                .spawn(move || to_markdown(&html))
                .unwrap()
                .join()
                .unwrap();
            assert!(text.contains("deep"), "{open}: {text}");
        }
    }
}

//! `WebFetch`: fetch an http(s) URL and return it as text (HTML as markdown).
//!
//! Hosts are resolved here and every address is vetted before connecting;
//! private, loopback and link-local addresses are refused unless the host is
//! in [`WebPolicy::private_hosts`]. The client then connects only to the
//! vetted addresses. Redirects are followed by hand, each hop vetted again,
//! and a hop to another host is put to [`WebPolicy::url_check`]. Under a
//! network allowlist ([`WebPolicy::egress`]) every URL, the first and each
//! hop, is judged by the list exactly as the egress proxy judges a request.
//! URLs with a user name or password are refused: reqwest would send them as
//! credentials.
mod address;
mod content;
mod fetch;
mod html;
mod policy;
mod text;

pub(crate) use address::non_public;

pub use policy::{
    DEFAULT_WEB_MAX_BYTES, DEFAULT_WEB_MAX_REDIRECTS, DEFAULT_WEB_TIMEOUT, UrlCheck, UrlVerdict,
    WebEgress, WebPolicy,
};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::result_cap::cap_chars;
use crate::tool_result::{NOTE_RESERVE, finish};
use crate::{ToolContext, ToolResult, TypedTool};
use content::Kind;
use fetch::{Outcome, Page, check_url};

#[derive(Debug, Deserialize)]
pub(crate) struct WebFetchInput {
    url: String,
    prompt: String,
}

#[derive(Debug, Default)]
pub struct WebFetchTool;

#[async_trait]
impl TypedTool for WebFetchTool {
    const NAME: &'static str = "WebFetch";
    const DESCRIPTION: &'static str = "Fetches a URL and returns its content for you to read.
- Takes a URL and a prompt as input. The prompt says what information you want from the \
page; it is repeated after the content so you can apply it.
- HTML pages are converted to markdown (scripts and styles dropped); other text such as \
JSON, XML or plain text is returned as is. Binary content (images, PDFs, archives) cannot \
be read.
- The URL must be a fully formed http:// or https:// URL; it is fetched as given (no \
automatic upgrade to https).
- Addresses on private networks, loopback and link-local are refused unless the host is \
explicitly allowed.
- Large pages are cut, and the result says so.
- When a URL redirects to a different host, the result says so and gives the redirect URL; \
call WebFetch again with that URL to fetch it.
- This tool is read-only and does not modify any files.";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["url", "prompt"];
    type Input = WebFetchInput;

    fn properties() -> Value {
        json!({
            "url": {"type": "string", "format": "uri", "description": "The URL to fetch content from"},
            "prompt": {"type": "string", "description": "The prompt to run on the fetched content"}
        })
    }

    async fn run(&self, input: WebFetchInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let url = Url::parse(input.url.trim()).map_err(|err| {
            format!(
                "`url`: {:?} is not a valid URL ({err}); give a fully formed http:// or https:// URL",
                input.url
            )
        })?;
        check_url(&url)?;
        let policy = &ctx.web;
        let fetched = tokio::select! {
            fetched = tokio::time::timeout(policy.timeout, fetch::fetch(url.clone(), policy)) => fetched,
            () = ctx.cancel.cancelled() => return Err("interrupted".into()),
        };
        let outcome = fetched.map_err(|_| {
            format!(
                "fetching {url} timed out after {:.1} s",
                policy.timeout.as_secs_f64()
            )
        })??;
        match outcome {
            Outcome::NeedsApproval { from, to, status } => Ok(ToolResult::ok(redirect_notice(
                &from,
                &to,
                status,
                &input.prompt,
            ))),
            Outcome::Page(mut page) => {
                let body = std::mem::take(&mut page.body);
                let read = body.len();
                let text = tokio::select! {
                    text = to_text(page.kind, body) => text,
                    () = ctx.cancel.cancelled() => return Err("interrupted".into()),
                };
                Ok(finish(
                    ToolResult::ok(render(&url, &page, read, text, &input.prompt, ctx)),
                    ctx,
                ))
            }
        }
    }
}

/// The body as text: HTML converted (off the async threads), the rest as is.
async fn to_text(kind: Kind, body: Vec<u8>) -> String {
    let text = String::from_utf8_lossy(&body).into_owned();
    match kind {
        Kind::Text => text,
        Kind::Html => html::to_markdown_on_thread(text).await,
    }
}

/// Header, content (capped so the prompt after it survives), notes, prompt.
fn render(
    start: &Url,
    page: &Page,
    read: usize,
    text: String,
    prompt: &str,
    ctx: &ToolContext,
) -> String {
    let mut head = format!("URL: {}\nStatus: {}\n", page.url, page.status);
    if &page.url != start {
        head.push_str(&format!("Redirected from: {start}\n"));
    }
    head.push_str(&format!(
        "Content-Type: {}\n\n",
        page.content_type.as_deref().unwrap_or("(none given)")
    ));
    let mut tail = String::new();
    if page.truncated {
        tail.push_str(&format!("\n\n[content truncated at {read} bytes]"));
    }
    tail.push_str(&format!("\n\nThe user's prompt for this page: {prompt}"));
    let budget = ctx
        .result_cap
        .saturating_sub(head.chars().count() + tail.chars().count() + NOTE_RESERVE)
        .max(1000);
    let body = if text.trim().is_empty() {
        "(the page has no text content)".to_string()
    } else {
        cap_chars(text, budget)
    };
    format!("{head}{body}{tail}")
}

fn redirect_notice(from: &Url, to: &Url, status: reqwest::StatusCode, prompt: &str) -> String {
    format!(
        "REDIRECT TO ANOTHER HOST: {from} redirected (HTTP {status}) to {to}, which is on a \
         different host that needs permission to fetch. The redirect was not followed.\n\
         To fetch it, call WebFetch again with:\n- url: \"{to}\"\n- prompt: \"{prompt}\""
    )
}

//! One fetch: vetted addresses, redirects followed by hand (each hop checked
//! again), and a body read no further than the size cap.
use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::{Client, Response, StatusCode, redirect};
use url::Url;

use super::address::{Vetted, vet};
use super::content::{Kind, classify, sniff};
use super::{UrlVerdict, WebPolicy};

const USER_AGENT: &str = concat!("agentd-webfetch/", env!("CARGO_PKG_VERSION"));
const ACCEPT_VALUE: &str = "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, application/json;q=0.9, */*;q=0.5";
/// How much of an error page is read for the excerpt.
const EXCERPT_BYTES: usize = 2048;

/// A page that was read.
#[derive(Debug)]
pub(crate) struct Page {
    pub url: Url,
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub kind: Kind,
    pub body: Vec<u8>,
    /// The body went on past the cap and was cut.
    pub truncated: bool,
}

/// How a fetch ended, short of an error.
#[derive(Debug)]
pub(crate) enum Outcome {
    Page(Page),
    /// A redirect to a host that needs the user's approval was not followed.
    NeedsApproval {
        from: Url,
        to: Url,
        status: StatusCode,
    },
}

/// Refuse URLs WebFetch never fetches: other schemes, and credentials, which
/// reqwest would send as a Basic `Authorization` header.
pub(crate) fn check_url(url: &Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{url} uses the {}: scheme; WebFetch only fetches http:// and https:// URLs",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{} contains a user name or password; WebFetch does not send credentials, so \
             give the URL without them",
            url.host_str().unwrap_or_default()
        ));
    }
    Ok(())
}

/// Fetch `start`, following redirects as the policy allows. Errors are
/// messages for the model.
pub(crate) async fn fetch(start: Url, policy: &WebPolicy) -> Result<Outcome, String> {
    let mut url = start;
    // The starting host passed the permission check before the call.
    let mut approved = vec![host_of(&url)];
    let mut redirects = 0u8;
    loop {
        let vetted = vet(&url, policy).await?;
        let response = get(&url, vetted).await?;
        let status = response.status();
        if let Some(next) = redirect_target(&url, &response)? {
            if redirects >= policy.max_redirects {
                return Err(format!(
                    "too many redirects (more than {}); the last one was from {url} to {next}",
                    policy.max_redirects
                ));
            }
            redirects += 1;
            check_url(&next).map_err(|err| format!("{url} redirected to a refused URL: {err}"))?;
            if !approved.contains(&host_of(&next)) {
                match policy.url_check.check(&next) {
                    UrlVerdict::Allow => approved.push(host_of(&next)),
                    UrlVerdict::Deny(reason) => {
                        return Err(format!(
                            "{url} redirected to {next}, which is not allowed: {reason}"
                        ));
                    }
                    UrlVerdict::Ask => {
                        // Never suggest a URL the address check would refuse.
                        vet(&next, policy).await?;
                        return Ok(Outcome::NeedsApproval {
                            from: url,
                            to: next,
                            status,
                        });
                    }
                }
            }
            url = next;
            continue;
        }
        if !status.is_success() {
            return Err(error_status(&url, response).await);
        }
        let content_type = header(&response, CONTENT_TYPE);
        let declared =
            classify(content_type.as_deref()).map_err(|err| format!("refusing {url}: {err}"))?;
        let (body, truncated) = read_capped(response, policy.max_bytes).await?;
        let kind = declared.or_else(|| sniff(&body)).ok_or_else(|| {
            format!("{url} sent no content type and its body is not text, so it cannot be read")
        })?;
        return Ok(Outcome::Page(Page {
            url,
            status,
            content_type,
            kind,
            body,
            truncated,
        }));
    }
}

/// The host part of a URL, as permission rules name it.
fn host_of(url: &Url) -> String {
    url.host_str().unwrap_or_default().to_ascii_lowercase()
}

fn header(response: &Response, name: reqwest::header::HeaderName) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// Where a redirect response points, resolved against the current URL.
fn redirect_target(url: &Url, response: &Response) -> Result<Option<Url>, String> {
    let status = response.status();
    let followed = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
    let Some(location) = header(response, LOCATION).filter(|_| followed) else {
        return Ok(None);
    };
    url.join(location.trim())
        .map(Some)
        .map_err(|err| format!("{url} redirected to an invalid location {location:?}: {err}"))
}

/// GET `url`, connecting only to the vetted addresses.
async fn get(url: &Url, vetted: Vetted) -> Result<Response, String> {
    let mut builder = Client::builder()
        .redirect(redirect::Policy::none())
        // A proxy would connect on our behalf to addresses nobody vetted.
        .no_proxy()
        .user_agent(USER_AGENT);
    if let Some(domain) = vetted.domain {
        builder = builder.dns_resolver(Arc::new(Pinned {
            domain,
            addrs: vetted.addrs,
        }));
    }
    let client = builder
        .build()
        .map_err(|err| format!("could not set up the HTTP client: {}", chain(&err)))?;
    client
        .get(url.clone())
        .header(ACCEPT, ACCEPT_VALUE)
        .send()
        .await
        .map_err(|err| format!("fetching {url} failed: {}", chain(&err)))
}

/// A resolver that knows one name: the vetted host. Anything else fails
/// rather than reaching the system resolver.
struct Pinned {
    domain: String,
    addrs: Vec<SocketAddr>,
}

impl Resolve for Pinned {
    fn resolve(&self, name: Name) -> Resolving {
        let result: Result<Addrs, Box<dyn std::error::Error + Send + Sync>> =
            if name.as_str().eq_ignore_ascii_case(&self.domain) {
                Ok(Box::new(self.addrs.clone().into_iter()))
            } else {
                Err(format!("{} was not vetted", name.as_str()).into())
            };
        Box::pin(std::future::ready(result))
    }
}

/// Read the body, stopping at `cap` bytes; `true` if there was more.
async fn read_capped(mut response: Response, cap: usize) -> Result<(Vec<u8>, bool), String> {
    let url = response.url().clone();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| format!("reading the body of {url} failed: {}", chain(&err)))?
    {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The error for a non-2xx response, with the start of its body.
async fn error_status(url: &Url, response: Response) -> String {
    let status = response.status();
    let html = matches!(
        classify(header(&response, CONTENT_TYPE).as_deref()),
        Ok(Some(Kind::Html))
    );
    let excerpt = match read_capped(response, EXCERPT_BYTES).await {
        Ok((body, _)) => {
            let text = String::from_utf8_lossy(&body).into_owned();
            let text = if html {
                super::html::to_markdown_on_thread(text).await
            } else {
                text
            };
            let words: Vec<&str> = text.split_whitespace().collect();
            let joined = words.join(" ");
            joined.chars().take(300).collect::<String>()
        }
        Err(_) => String::new(),
    };
    if excerpt.is_empty() {
        format!("{url} returned HTTP {status}")
    } else {
        format!("{url} returned HTTP {status}: {excerpt}")
    }
}

/// An error and its causes, which reqwest keeps apart.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

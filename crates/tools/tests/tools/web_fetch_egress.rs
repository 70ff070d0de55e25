//! `WebFetch` under a profile's network allowlist: every URL it fetches, the
//! first and each redirect, is judged by the list as the egress proxy would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentd_tools::egress::{EgressAllowlist, NetworkRefusals};
use agentd_tools::{ToolContext, WebEgress, WebPolicy};

use crate::support::{Workspace, assert_error_containing, assert_ok};
use crate::web_fetch::{fetch, serve};

fn context(ws: &Workspace, allow: &[String]) -> (ToolContext, NetworkRefusals) {
    let refusals = NetworkRefusals::default();
    let mut ctx = ws.ctx.clone();
    ctx.web = WebPolicy {
        // A permission rule's private host counts for nothing under a list.
        private_hosts: vec!["127.0.0.1".to_string()].into(),
        egress: Some(WebEgress {
            list: Arc::new(EgressAllowlist::parse(allow, false).unwrap()),
            refusals: refusals.clone(),
        }),
        ..WebPolicy::default()
    };
    (ctx, refusals)
}

#[tokio::test]
async fn the_first_url_must_be_on_the_list() {
    let ws = Workspace::new();
    let (port, other) = (serve().await, serve().await);
    let (ctx, refusals) = context(&ws, &[format!("localhost:{port}")]);
    assert_ok(&fetch(&ctx, &format!("http://localhost:{port}/page")).await);
    for url in [
        format!("http://localhost:{other}/page"),
        format!("http://127.0.0.1:{port}/page"),
    ] {
        let result = fetch(&ctx, &url).await;
        assert_error_containing(&result, "not on the network allowlist");
    }
    let refused: Vec<(String, u16)> = refusals
        .take()
        .into_iter()
        .map(|r| (r.host, r.port))
        .collect();
    assert_eq!(
        refused,
        [("localhost".into(), other), ("127.0.0.1".into(), port)]
    );
}

#[tokio::test]
async fn every_redirect_must_be_on_the_list_even_to_the_same_host() {
    let ws = Workspace::new();
    let (port, other) = (serve().await, serve().await);
    let (ctx, refusals) = context(&ws, &[format!("localhost:{port}")]);
    let same_port = format!("http://localhost:{port}/redirect?to=/page");
    assert_ok(&fetch(&ctx, &same_port).await);
    // Same host, another port: a port the list does not name.
    let other_port = format!("http://localhost:{port}/redirect?to=http://localhost:{other}/page");
    let result = fetch(&ctx, &other_port).await;
    assert_error_containing(&result, "not on the network allowlist");
    assert_eq!(refusals.take().len(), 1);
}

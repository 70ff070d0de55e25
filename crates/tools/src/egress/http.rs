//! One request through the proxy. `CONNECT host:port` opens a tunnel (HTTPS);
//! a plain HTTP request must name its target in absolute form
//! (`GET http://host/path`), is judged by that target alone, and goes on in
//! origin form with the judged `Host`, over a connection of its own to the
//! checked address. What the client's own `Host` header says never counts,
//! and the next request on the same connection is judged afresh.
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::{Either, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::OwnedSemaphorePermit;

use super::EgressError;
use super::idle::Idle;
use super::proxy::Shared;

pub(super) type ProxyBody = Either<Incoming, Either<Full<Bytes>, Empty<Bytes>>>;

/// Headers that belong to one hop: never passed on, either way.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

pub(super) async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Result<Response<ProxyBody>, Infallible> {
    let response = if request.method() == Method::CONNECT {
        tunnel(request, shared, slot).await
    } else {
        forward(request, &shared).await
    };
    Ok(response)
}

/// `CONNECT host:port`: the tunnel opens once the host passed.
async fn tunnel(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<ProxyBody> {
    let (host, port) = match connect_target(request.uri()) {
        Ok(target) => target,
        Err(reason) => return bad_request(&shared, &reason),
    };
    let upstream = match shared.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(err) => return refused(&err),
    };
    let idle = shared.limits.idle_timeout;
    tokio::spawn(async move {
        let _slot = slot;
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            return;
        };
        let mut client = TokioIo::new(upgraded);
        let mut upstream = Idle::new(upstream, idle);
        tokio::select! {
            () = shared.stop.cancelled() => {}
            _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        }
    });
    Response::new(Either::Right(Either::Right(Empty::new())))
}

/// A plain HTTP request, sent on in origin form to the host it names.
async fn forward(request: Request<Incoming>, shared: &Shared) -> Response<ProxyBody> {
    let (host, port, authority) = match http_target(request.uri()) {
        Ok(target) => target,
        Err(reason) => return bad_request(shared, &reason),
    };
    let request = match origin_form(request, &authority) {
        Ok(request) => request,
        Err(reason) => return bad_request(shared, &reason),
    };
    let upstream = match shared.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(err) => return refused(&err),
    };
    let io = TokioIo::new(Idle::new(upstream, shared.limits.idle_timeout));
    let (mut sender, connection) = match hyper::client::conn::http1::handshake(io).await {
        Ok(pair) => pair,
        Err(err) => return answer(StatusCode::BAD_GATEWAY, &format!("{host}:{port}: {err}")),
    };
    let stop = shared.stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            _ = connection => {}
        }
    });
    match sender.send_request(request).await {
        // Nothing was asked to switch protocols (`Upgrade` is not passed on).
        Ok(response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => answer(
            StatusCode::BAD_GATEWAY,
            &format!("{host}:{port} switched protocols unasked"),
        ),
        Ok(mut response) => {
            strip_hop_by_hop(response.headers_mut());
            response.map(Either::Left)
        }
        Err(err) => answer(StatusCode::BAD_GATEWAY, &format!("{host}:{port}: {err}")),
    }
}

/// `uri` as it may be logged and shown: scheme, host and port, never its
/// credentials, path or query (which may hold tokens).
fn shown(uri: &Uri) -> String {
    let host = uri.host().unwrap_or("?");
    let port = uri
        .port_u16()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    match uri.scheme_str() {
        Some(scheme) => format!("{scheme}://{host}{port}/…"),
        None if uri.authority().is_some() => format!("{host}{port}"),
        None => "a path without a host".into(),
    }
}

/// The host and port of a `CONNECT` (authority form only).
fn connect_target(uri: &Uri) -> Result<(String, u16), String> {
    let authority = uri
        .authority()
        .filter(|_| uri.scheme().is_none() && uri.path_and_query().is_none())
        .ok_or_else(|| format!("CONNECT needs host:port, not {}", shown(uri)))?;
    if authority.as_str().contains('@') {
        return Err("a CONNECT target with credentials".into());
    }
    let port = authority
        .port_u16()
        .ok_or_else(|| format!("CONNECT target {} needs a port", shown(uri)))?;
    Ok((authority.host().to_ascii_lowercase(), port))
}

/// Host, port and `Host` value of a plain request's absolute-form target.
fn http_target(uri: &Uri) -> Result<(String, u16, HeaderValue), String> {
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "only http://… requests in absolute form and CONNECT go through this proxy, not {}",
            shown(uri)
        ));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{} has no host", shown(uri)))?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err(format!("{} has credentials or no host", shown(uri)));
    }
    let port = authority.port_u16().unwrap_or(80);
    let value = HeaderValue::from_str(authority.as_str()).map_err(|err| err.to_string())?;
    Ok((authority.host().to_ascii_lowercase(), port, value))
}

/// `request` as the host gets it: origin form, the judged `Host`, no
/// hop-by-hop headers, and one request only on its connection.
fn origin_form(
    request: Request<Incoming>,
    host: &HeaderValue,
) -> Result<Request<Incoming>, String> {
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .parse::<Uri>()
        .map_err(|err| err.to_string())?;
    parts.uri = path;
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.insert(header::HOST, host.clone());
    parts
        .headers
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(Request::from_parts(parts, body))
}

/// Removes the hop-by-hop headers and those `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&named) {
        headers.remove(name);
    }
    // hyper frames the body itself.
    headers.remove(header::TRANSFER_ENCODING);
}

fn bad_request(shared: &Shared, reason: &str) -> Response<ProxyBody> {
    shared.malformed(reason);
    answer(StatusCode::BAD_REQUEST, reason)
}

fn refused(err: &EgressError) -> Response<ProxyBody> {
    match err {
        EgressError::Refused(reason) => answer(StatusCode::FORBIDDEN, reason),
        EgressError::Unreachable(reason) => answer(StatusCode::BAD_GATEWAY, reason),
    }
}

fn answer(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    let body = format!("agentd refused this connection: {reason}\n");
    let mut response = Response::new(Either::Right(Either::Left(Full::new(Bytes::from(body)))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_absolute_http_or_authority_form() {
        let uri = |text: &str| text.parse::<Uri>().unwrap();
        let (host, port, value) = http_target(&uri("http://Example.org:8080/a?b=1")).unwrap();
        assert_eq!(
            (host.as_str(), port, value.to_str().unwrap()),
            ("example.org", 8080, "Example.org:8080")
        );
        assert_eq!(http_target(&uri("http://x.org/")).unwrap().1, 80);
        for bad in [
            "/relative",
            "https://x.org/",
            "http://u:p@x.org/",
            "ftp://x/",
        ] {
            assert!(http_target(&uri(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            connect_target(&uri("pypi.org:443")).unwrap(),
            ("pypi.org".into(), 443)
        );
        assert_eq!(
            connect_target(&uri("[::1]:8443")).unwrap(),
            ("[::1]".into(), 8443)
        );
        for bad in ["pypi.org", "http://pypi.org:443/", "u@pypi.org:443"] {
            assert!(connect_target(&uri(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_go() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-secret"),
            ("proxy-authorization", "Basic x"),
            ("x-secret", "1"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["accept"]);
    }
}

#[cfg(test)]
mod shown_tests {
    use super::*;

    #[test]
    fn a_shown_target_keeps_no_credentials_path_or_query() {
        let uri: Uri = "https://user:token@pypi.org:8443/simple?key=s3cret"
            .parse()
            .unwrap();
        assert_eq!(shown(&uri), "https://pypi.org:8443/…");
        let err = http_target(&uri).unwrap_err();
        assert!(!err.contains("token") && !err.contains("s3cret"), "{err}");
        let uri: Uri = "http://user:token@pypi.org/x".parse().unwrap();
        let err = http_target(&uri).unwrap_err();
        assert!(!err.contains("token"), "{err}");
        assert_eq!(
            shown(&"/bare/path?k=v".parse().unwrap()),
            "a path without a host"
        );
    }
}

//! What the OpenAPI document says beyond the handlers' own annotations: the
//! error answers shared by many routes, from [`ApiError::CODES`], added to
//! each operation they apply to. (docs/api.md's error and event tables come
//! from the same sources: see `doc_tables`.)

use std::collections::BTreeSet;

use axum::http::StatusCode;
use utoipa::openapi::path::{HttpMethod, Operation};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};

use super::error::ApiError;

/// Everything added after the routes are collected (a `Modify` of the
/// `#[openapi]` struct runs before they are).
pub(super) fn finish(api: &mut OpenApi) {
    super::sign_in::document_cookie(api);
    add_common_errors(api);
}

/// The answers an operation can get whatever its handler does, by what the
/// operation takes: credentials, a JSON body, parameters, a session id.
fn common_errors(
    path: &str,
    method: &HttpMethod,
    operation: &Operation,
) -> Vec<(StatusCode, &'static [&'static str])> {
    let secured = operation
        .security
        .as_ref()
        .is_some_and(|security| !security.is_empty());
    let has_body = operation.request_body.is_some();
    let has_params = operation
        .parameters
        .as_ref()
        .is_some_and(|params| !params.is_empty());
    let writes = !matches!(
        method,
        HttpMethod::Get | HttpMethod::Head | HttpMethod::Options
    );
    let mut errors = Vec::new();
    if has_body || has_params {
        errors.push((StatusCode::BAD_REQUEST, &["invalid_request"][..]));
    }
    if secured {
        errors.push((StatusCode::UNAUTHORIZED, &["unauthorized"][..]));
    }
    // A cookie-signed (or, with `auth = "none"`, any) write from a foreign `Origin`.
    if writes && path.starts_with("/v1/") {
        errors.push((StatusCode::FORBIDDEN, &["bad_origin"][..]));
    }
    if path.starts_with("/v1/sessions/{id}") {
        errors.push((StatusCode::NOT_FOUND, &["not_found"][..]));
    }
    if has_body {
        errors.push((StatusCode::PAYLOAD_TOO_LARGE, &["too_large"][..]));
        errors.push((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &["unsupported_media_type"][..],
        ));
    }
    // Everything under /v1 reads the store (credentials included).
    if path.starts_with("/v1/") {
        errors.push((StatusCode::INTERNAL_SERVER_ERROR, &["internal"][..]));
        errors.push((StatusCode::SERVICE_UNAVAILABLE, &["store_unavailable"][..]));
    }
    errors
}

/// Adds the shared error answers to every operation they apply to, unless
/// the operation documents that status itself (with its own words).
fn add_common_errors(api: &mut OpenApi) {
    let mut used = BTreeSet::new();
    for (path, item) in api.paths.paths.iter_mut() {
        let operations = [
            (HttpMethod::Get, &mut item.get),
            (HttpMethod::Put, &mut item.put),
            (HttpMethod::Post, &mut item.post),
            (HttpMethod::Delete, &mut item.delete),
            (HttpMethod::Patch, &mut item.patch),
        ];
        for (method, operation) in operations {
            let Some(operation) = operation else { continue };
            for (status, codes) in common_errors(path, &method, operation) {
                let key = status.as_u16().to_string();
                let name = response_name(codes);
                if !operation.responses.responses.contains_key(&key) {
                    operation
                        .responses
                        .responses
                        .insert(key, RefOr::Ref(Ref::from_response_name(name.clone())));
                    used.insert((name, codes));
                }
            }
        }
    }
    let components = api.components.get_or_insert_with(Default::default);
    for (name, codes) in used {
        let response = ResponseBuilder::new()
            .description(describe(codes))
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build();
        components.responses.insert(name, RefOr::T(response));
    }
}

fn response_name(codes: &[&str]) -> String {
    codes.join("_or_")
}

fn describe(codes: &[&str]) -> String {
    codes
        .iter()
        .map(|code| {
            let listed = ApiError::CODES.iter().find(|c| c.code == *code);
            format!("`{code}`: {}", listed.map_or("", |c| c.meaning))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

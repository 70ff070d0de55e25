//! What the OpenAPI document says beyond the handlers' own annotations: the
//! error answers shared by many routes, from [`ApiError::CODES`], added to
//! each operation they apply to. (docs/api.md's error and event tables come
//! from the same sources: see `doc_tables`.)

use std::collections::BTreeSet;
use std::collections::btree_map::Entry;

use utoipa::openapi::path::{HttpMethod, Operation, ParameterIn};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};

use super::error::{ApiError, ErrorCode};

/// Everything added after the routes are collected (a `Modify` of the
/// `#[openapi]` struct runs before they are).
pub(super) fn finish(api: &mut OpenApi) {
    super::sign_in::document_cookie(api);
    super::anthropic::document_api_key(api);
    add_common_errors(api);
}

/// The answers an operation can get whatever its handler does, by what the
/// operation takes: credentials, a JSON body, parameters, a session id.
fn common_errors(path: &str, method: &HttpMethod, operation: &Operation) -> Vec<&'static str> {
    let secured = operation
        .security
        .as_ref()
        .is_some_and(|security| !security.is_empty());
    let has_body = operation.request_body.is_some();
    // Path and query parameters are parsed before the handler runs.
    let has_params = operation
        .parameters
        .iter()
        .flatten()
        .any(|param| {
            matches!(param, RefOr::T(p) if matches!(p.parameter_in, ParameterIn::Path | ParameterIn::Query))
        });
    let writes = !matches!(
        method,
        HttpMethod::Get | HttpMethod::Head | HttpMethod::Options
    );
    // With `auth = "none"`, any request naming another host (see `local_host`).
    let mut errors = vec!["bad_host"];
    if has_body || has_params {
        errors.push("invalid_request");
    }
    if secured {
        errors.push("unauthorized");
    }
    // A cookie-signed (or, with `auth = "none"`, any) write from a foreign `Origin`.
    if writes && path.starts_with("/v1/") {
        errors.push("bad_origin");
    }
    if path.starts_with("/v1/sessions/{id}") {
        errors.push("not_found");
    }
    if has_body {
        errors.push("too_large");
        errors.push("unsupported_media_type");
    }
    // Everything under /v1 reads the store (credentials included).
    if path.starts_with("/v1/") {
        errors.push("internal");
        errors.push("store_unavailable");
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
            for code in common_errors(path, &method, operation) {
                let key = listed(code).status.as_u16().to_string();
                if let Entry::Vacant(slot) = operation.responses.responses.entry(key) {
                    slot.insert(RefOr::Ref(Ref::from_response_name(code)));
                    used.insert(code);
                }
            }
        }
    }
    let components = api.components.get_or_insert_with(Default::default);
    for code in used {
        let response = ResponseBuilder::new()
            .description(format!("`{code}`: {}", listed(code).meaning))
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build();
        components
            .responses
            .insert(code.to_string(), RefOr::T(response));
    }
}

/// `code`'s entry of [`ApiError::CODES`] (the status comes from there).
fn listed(code: &str) -> &'static ErrorCode {
    ApiError::CODES
        .iter()
        .find(|c| c.code == code)
        .unwrap_or_else(|| panic!("{code} is not in ApiError::CODES"))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Each operation of the document with its path and method.
    fn operations(document: &Value) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                out.push((path.clone(), method.clone(), operation.clone()));
            }
        }
        out
    }

    #[test]
    fn every_operation_documents_the_errors_any_request_to_it_can_get() {
        let document = serde_json::to_value(super::super::openapi()).unwrap();
        for (path, method, operation) in operations(&document) {
            let responses = operation["responses"].as_object().unwrap();
            let has = |status: &str| responses.contains_key(status);
            let what = format!("{method} {path}");
            if operation["requestBody"].is_object() {
                for status in ["400", "413", "415"] {
                    assert!(has(status), "{what} takes JSON but lacks {status}");
                }
            }
            if operation["security"].is_array() {
                assert!(has("401"), "{what} needs credentials but lacks 401");
            }
            if path.starts_with("/v1/sessions/{id}") {
                assert!(has("404"), "{what} names a session but lacks 404");
            }
            if path.starts_with("/v1/") {
                assert!(has("500") && has("503"), "{what} reads the store");
            }
        }
        // Shared answers resolve, with the error body.
        let shared = &document["components"]["responses"];
        let unauthorized = &shared["unauthorized"];
        assert!(
            unauthorized["description"]
                .as_str()
                .unwrap()
                .contains("`unauthorized`")
        );
        assert_eq!(
            unauthorized["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody"
        );
        let text = document.to_string();
        for reference in text.split("\"#/components/responses/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(shared[name].is_object(), "dangling response $ref {name}");
        }
    }

    #[test]
    fn the_event_stream_is_described_event_by_event() {
        let document = serde_json::to_value(super::super::openapi()).unwrap();
        let ok = &document["paths"]["/v1/sessions/{id}/events"]["get"]["responses"]["200"];
        let stream = &ok["content"]["text/event-stream"]["schema"]["$ref"];
        assert_eq!(stream, "#/components/schemas/StreamedEvent");
        let event = &document["components"]["schemas"]["StreamedEvent"];
        assert_eq!(
            event["properties"]["data"]["contentMediaType"],
            "application/json"
        );
        assert_eq!(
            event["properties"]["data"]["contentSchema"]["$ref"],
            "#/components/schemas/EventEnvelope"
        );
        let names: Vec<&str> = event["properties"]["event"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(names.contains(&"turn.finished") && names.contains(&"tool.started"));
        assert!(document["components"]["schemas"]["Event"]["oneOf"].is_array());
    }

    #[test]
    fn the_event_vocabularies_are_strings_that_name_their_values() {
        let document = serde_json::to_value(super::super::openapi()).unwrap();
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["ErrorInfo"]["properties"]["code"]["$ref"],
            "#/components/schemas/ErrorCode"
        );
        for (name, value) in [
            ("ErrorCode", "`store_error`"),
            ("ErrorCode", "`claude_code_<subtype>`"),
            ("Decision", "`allow_session`"),
            ("Resolver", "`user:<name>`"),
            ("PendingKind", "`question`"),
        ] {
            let schema = &schemas[name];
            assert_eq!(schema["type"], "string", "{name}");
            // Open: a newer agentd may send a value not listed.
            assert!(schema.get("enum").is_none(), "{name}");
            let description = schema["description"].as_str().unwrap();
            assert!(description.contains(value), "{name}: {description}");
        }
    }
}

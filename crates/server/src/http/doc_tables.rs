//! docs/api.md's error and event tables, rendered from [`ApiError::CODES`],
//! [`agentd_protocol::Event::TYPES`], the OpenAPI document and the event
//! vocabularies ([`ErrorCode`], [`Resolver`]), and checked against the
//! marked sections of docs/api.md. `AGENTD_UPDATE_DOCS=1 cargo
//! test -p agentd-server doc_tables` rewrites those sections.

use std::path::PathBuf;

use agentd_protocol::{ErrorCode, Resolver};
use serde_json::Value;

use super::error::ApiError;

/// docs/api.md's table of error codes.
pub fn error_table() -> String {
    let mut out = String::from("| status | `code` | when |\n|---|---|---|\n");
    for code in ApiError::CODES {
        out.push_str(&format!(
            "| {} | `{}` | {} |\n",
            code.status.as_u16(),
            code.code,
            code.meaning
        ));
    }
    out
}

/// A table of wire values and their meanings: the unit values, then the
/// forms that carry a value.
fn vocabulary_table(head: &str, known: &[(&str, &str)], forms: &[(&str, &str)]) -> String {
    let mut out = format!("| {head} | meaning |\n|---|---|\n");
    for (wire, meaning) in known.iter().chain(forms) {
        out.push_str(&format!("| `{wire}` | {meaning} |\n"));
    }
    out
}

/// docs/api.md's table of the `code`s of `error` events and `turn.finished`'s `error`.
pub fn event_error_table() -> String {
    vocabulary_table("`code`", ErrorCode::KNOWN, ErrorCode::FORMS)
}

/// docs/api.md's table of who or what resolves a request (the events' `by`).
pub fn resolver_table() -> String {
    vocabulary_table("`by`", Resolver::KNOWN, Resolver::FORMS)
}

/// docs/api.md's table of event types: the names and meanings of
/// [`agentd_protocol::Event::TYPES`], the fields from the document's `Event`
/// schema (`?`: may be absent or null).
pub fn event_table(document: &Value) -> String {
    let schemas = &document["components"]["schemas"];
    let mut out = String::from("| `type` | what happened | fields |\n|---|---|---|\n");
    for (name, meaning) in agentd_protocol::Event::TYPES {
        let fields = variant_schema(schemas, name)
            .map(|variant| fields(schemas, variant).join(", "))
            .unwrap_or_default();
        out.push_str(&format!("| `{name}` | {meaning} | {fields} |\n"));
    }
    out
}

/// The `type` names of the `Event` schema's variants.
pub fn schema_event_types(document: &Value) -> Vec<String> {
    let schemas = &document["components"]["schemas"];
    let variants = schemas["Event"]["oneOf"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    variants
        .iter()
        .filter_map(|variant| type_tag(schemas, variant))
        .collect()
}

fn variant_schema<'a>(schemas: &'a Value, name: &str) -> Option<&'a Value> {
    schemas["Event"]["oneOf"]
        .as_array()?
        .iter()
        .find(|variant| type_tag(schemas, variant).as_deref() == Some(name))
}

fn type_tag(schemas: &Value, variant: &Value) -> Option<String> {
    parts(schemas, variant).into_iter().find_map(|part| {
        let tag = part["properties"]["type"]["enum"].as_array()?;
        tag.first()?.as_str().map(str::to_string)
    })
}

/// A schema and, through `allOf` and `$ref`, the object schemas it is made of.
fn parts<'a>(schemas: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return parts(schemas, &schemas[name]);
    }
    let mut out = vec![schema];
    for part in schema["allOf"].as_array().into_iter().flatten() {
        out.extend(parts(schemas, part));
    }
    out
}

/// `name` for required fields, `name?` for the others; `type` left out.
fn fields(schemas: &Value, variant: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for part in parts(schemas, variant) {
        let Some(properties) = part["properties"].as_object() else {
            continue;
        };
        let required: Vec<&str> = part["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for name in properties.keys().filter(|name| *name != "type") {
            let mark = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            out.push(format!("`{name}{mark}`"));
        }
    }
    out
}

/// The text between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`.
fn section<'a>(doc: &'a str, name: &str) -> Option<(usize, usize, &'a str)> {
    let start_marker = format!("<!-- generated:{name} -->\n");
    let end_marker = format!("<!-- /generated:{name} -->");
    let start = doc.find(&start_marker)? + start_marker.len();
    let end = start + doc[start..].find(&end_marker)?;
    Some((start, end, &doc[start..end]))
}

#[test]
fn the_tables_of_docs_api_md_are_those_of_the_code() {
    let document = serde_json::to_value(super::openapi()).unwrap();
    let mut in_schema = schema_event_types(&document);
    let mut listed: Vec<String> = agentd_protocol::Event::TYPES
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    in_schema.sort();
    listed.sort();
    assert_eq!(
        in_schema, listed,
        "the Event schema and Event::TYPES name different event types"
    );

    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md");
    let mut doc = std::fs::read_to_string(&path).unwrap();
    let update = std::env::var("AGENTD_UPDATE_DOCS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, table) in [
        ("error-codes", error_table()),
        ("event-types", event_table(&document)),
        ("event-error-codes", event_error_table()),
        ("resolvers", resolver_table()),
    ] {
        let (start, end, current) = section(&doc, name).unwrap_or_else(|| {
            panic!(
                "docs/api.md has no <!-- generated:{name} --> … <!-- /generated:{name} --> section"
            )
        });
        if current != table {
            stale.push(format!("--- {name}:\n{table}"));
            doc.replace_range(start..end, &table);
        }
    }
    if update {
        std::fs::write(&path, &doc).unwrap();
    } else {
        assert!(
            stale.is_empty(),
            "docs/api.md is out of date; rerun with AGENTD_UPDATE_DOCS=1 to rewrite it with:\n{}",
            stale.join("\n")
        );
    }
}

//! Turning a model's tool input into a typed struct, with errors the model can
//! act on. The tool's JSON Schema is the single source of truth: it is checked
//! first (so messages name the offending field), then serde builds the struct.
use std::path::PathBuf;

use agentd_sandbox::PathError;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{ToolContext, ToolResult};

/// Resolve a path the model gave in `field`, or explain why it is refused.
pub(crate) fn resolve_path(ctx: &ToolContext, field: &str, path: &str) -> Result<PathBuf, String> {
    ctx.guard.resolve(path).map_err(|err| match err {
        PathError::Outside { path } => format!(
            "`{field}`: {path:?} is outside the workspace ({}); only paths inside it can be used",
            ctx.guard.workspace().display()
        ),
        PathError::Invalid { .. } => format!("`{field}`: {err}"),
    })
}

/// Check `input` against `schema` (the subset of JSON Schema the built-ins
/// use) and deserialize it. `null` counts as "not given" for optional fields.
pub(crate) fn parse_input<T: DeserializeOwned>(
    tool: &str,
    schema: &Value,
    input: Value,
) -> Result<T, ToolResult> {
    let invalid = |detail: String| ToolResult::error(format!("Invalid input for {tool}: {detail}"));
    let object = match input {
        Value::Object(object) => object,
        Value::String(text) => {
            return Err(invalid(format!(
                "expected a JSON object but got a string, so the arguments were probably not \
                 valid JSON; send an object with the fields {}. Received: {}",
                field_list(schema),
                preview(&text)
            )));
        }
        other => {
            return Err(invalid(format!(
                "expected a JSON object with the fields {}, got {}",
                field_list(schema),
                type_name(&other)
            )));
        }
    };
    check_object(schema, &object, "").map_err(invalid)?;
    let cleaned = strip_nulls(Value::Object(object));
    serde_json::from_value(cleaned).map_err(|err| invalid(err.to_string()))
}

fn check_object(schema: &Value, object: &Map<String, Value>, at: &str) -> Result<(), String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (key, value) in object {
        let Some(field_schema) = properties.get(key) else {
            return Err(format!(
                "unknown field `{}`; allowed fields are {}",
                join_path(at, key),
                field_list(schema)
            ));
        };
        if !value.is_null() {
            check_value(field_schema, value, &join_path(at, key))?;
        }
    }
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if object.get(name).is_none_or(Value::is_null) {
            return Err(format!("missing required field `{}`", join_path(at, name)));
        }
    }
    Ok(())
}

fn check_value(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let expected = schema.get("type").and_then(Value::as_str).unwrap_or("any");
    let type_ok = match expected {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    if !type_ok {
        return Err(format!(
            "field `{at}` must be {}, got {}",
            article(expected),
            type_name(value)
        ));
    }
    if let (Some(minimum), Some(number)) = (
        schema.get("minimum").and_then(Value::as_f64),
        value.as_f64(),
    ) && number < minimum
    {
        return Err(format!(
            "field `{at}` must be at least {minimum}, got {number}"
        ));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let options: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!(
            "field `{at}` must be one of {}, got {value}",
            options.join(", ")
        ));
    }
    match value {
        Value::Array(items) => {
            let min_items = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            if (items.len() as u64) < min_items {
                return Err(format!("field `{at}` needs at least {min_items} item(s)"));
            }
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check_value(item_schema, item, &format!("{at}[{index}]"))?;
                }
            }
            Ok(())
        }
        Value::Object(object) if schema.get("properties").is_some() => {
            check_object(schema, object, at)
        }
        _ => Ok(()),
    }
}

/// Optional fields sent as `null` are treated as absent.
fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

fn join_path(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

fn field_list(schema: &Value) -> String {
    let names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(|key| format!("`{key}`")).collect())
        .unwrap_or_default();
    names.join(", ")
}

fn article(type_name: &str) -> String {
    match type_name {
        "integer" | "array" | "object" => format!("an {type_name}"),
        other => format!("a {other}"),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_f64() => "a fractional number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn preview(text: &str) -> String {
    const PREVIEW_CHARS: usize = 200;
    let mut shown: String = text.chars().take(PREVIEW_CHARS).collect();
    if text.chars().count() > PREVIEW_CHARS {
        shown.push('…');
    }
    format!("{shown:?}")
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Sample {
        name: String,
        count: Option<u64>,
        items: Option<Vec<Item>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        text: String,
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "count": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"]
                }}
            },
            "required": ["name"]
        })
    }

    fn error_of(input: Value) -> String {
        parse_input::<Sample>("Sample", &schema(), input)
            .unwrap_err()
            .content
    }

    #[test]
    fn valid_input_parses_and_nulls_are_absent() {
        let parsed: Sample =
            parse_input("Sample", &schema(), json!({"name": "x", "count": null})).unwrap();
        assert_eq!(
            parsed,
            Sample {
                name: "x".into(),
                count: None,
                items: None
            }
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert!(error_of(json!({})).contains("missing required field `name`"));
        assert!(error_of(json!({"name": null})).contains("missing required field `name`"));
        assert!(error_of(json!({"name": "x", "bogus": 1})).contains("unknown field `bogus`"));
        let wrong_type = error_of(json!({"name": "x", "count": "3"}));
        assert!(
            wrong_type.contains("field `count` must be an integer, got a string"),
            "{wrong_type}"
        );
        assert!(error_of(json!({"name": "x", "count": 0})).contains("`count` must be at least 1"));
        assert!(error_of(json!({"name": "x", "mode": "c"})).contains("`mode` must be one of"));
        let nested = error_of(json!({"name": "x", "items": [{"text": "a"}, {}]}));
        assert!(
            nested.contains("missing required field `items[1].text`"),
            "{nested}"
        );
    }

    #[test]
    fn a_string_instead_of_an_object_is_invalid_input() {
        let message = error_of(json!("{\"name\": \"x\""));
        assert!(message.starts_with("Invalid input for Sample"), "{message}");
        assert!(message.contains("not valid JSON"), "{message}");
        assert!(error_of(json!(null)).contains("got null"));
    }
}

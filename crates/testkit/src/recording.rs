//! The log of requests the server received.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    /// The path without the query string, e.g. `/v1/messages`.
    pub path: String,
    /// Lower-case header names; repeated headers are joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The JSON body; a body that is not JSON is kept as a string, an empty one as null.
    pub body: Value,
}

impl RecordedRequest {
    pub fn new(method: &str, path: &str, headers: &HeaderMap, body: &[u8]) -> Self {
        let mut map: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in headers {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            map.entry(name.as_str().to_string())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
        };
        Self {
            method: method.to_string(),
            path: path.to_string(),
            headers: map,
            body,
        }
    }

    /// All text of the body (for quick `contains` checks in tests).
    pub fn body_text(&self) -> String {
        self.body.to_string()
    }
}

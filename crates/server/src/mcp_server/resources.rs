//! Resources: a session's transcript (`agentd://sessions/{id}/transcript`,
//! the stored messages as JSON) and its workspace files
//! (`agentd://sessions/{id}/files/{path}`, read by `GET …/files/content`:
//! the files API's descriptor-based, permission-checked read).

use base64::Engine;
use rmcp::model::{
    ErrorData, ListResourcesResult, ReadResourceResult, Resource, ResourceContents,
    ResourceTemplate,
};

use super::api::{Api, segment};

const SCHEME: &str = "agentd://sessions/";
const TRANSCRIPT_TEMPLATE: &str = "agentd://sessions/{id}/transcript";
const FILE_TEMPLATE: &str = "agentd://sessions/{id}/files/{path}";

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TRANSCRIPT_TEMPLATE, "transcript")
            .with_description("A session's transcript: its stored messages, as JSON")
            .with_mime_type("application/json"),
        ResourceTemplate::new(FILE_TEMPLATE, "file")
            .with_description("A file of a session's workspace (path relative to it)"),
    ]
}

/// The transcripts of the caller's newest sessions.
pub async fn list(api: &Api) -> Result<ListResourcesResult, ErrorData> {
    let listed = api
        .get("/v1/sessions?sort=created&limit=50")
        .await
        .map_err(refused)?;
    let sessions = listed["sessions"].as_array().cloned().unwrap_or_default();
    let resources = sessions
        .iter()
        .filter_map(|session| {
            let id = session["id"].as_str()?;
            let title = session["title"].as_str().unwrap_or(id);
            let resource = Resource::new(
                format!("{SCHEME}{id}/transcript"),
                format!("transcript of {title}"),
            )
            .with_mime_type("application/json");
            Some(resource)
        })
        .collect();
    Ok(ListResourcesResult::with_all_items(resources))
}

pub async fn read(api: &Api, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let unknown = || {
        ErrorData::resource_not_found(
            format!("{uri:?} is not {TRANSCRIPT_TEMPLATE} or {FILE_TEMPLATE}"),
            None,
        )
    };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(unknown)?;
    let (id, what) = rest.split_once('/').ok_or_else(unknown)?;
    if id.is_empty() {
        return Err(unknown());
    }
    let id_segment = segment(id);
    if what == "transcript" {
        let messages = api
            .get(&format!("/v1/sessions/{id_segment}/messages"))
            .await
            .map_err(refused)?;
        let text = serde_json::to_string_pretty(&messages["messages"])
            .map_err(|err| ErrorData::internal_error(err.to_string(), None))?;
        let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
        return Ok(ReadResourceResult::new(vec![contents]));
    }
    let path = what
        .strip_prefix("files/")
        .filter(|p| !p.is_empty())
        .ok_or_else(unknown)?;
    let path = percent_decoded(path);
    let bytes = api
        .bytes(&format!(
            "/v1/sessions/{id_segment}/files/content?path={}",
            segment(&path)
        ))
        .await
        .map_err(refused)?;
    let contents = match std::str::from_utf8(&bytes) {
        Ok(text) if !text.contains('\0') => ResourceContents::text(text, uri),
        _ => {
            let blob = base64::engine::general_purpose::STANDARD.encode(&bytes);
            ResourceContents::blob(blob, uri).with_mime_type("application/octet-stream")
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// A URI's path as the file path it names (`%20` a space, and so on).
fn percent_decoded(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

/// The API's refusal as an MCP error: a missing session or file is
/// `resource not found`, the rest says what the API said.
fn refused(refused: super::api::Refused) -> ErrorData {
    match refused.status.as_u16() {
        404 => ErrorData::resource_not_found(refused.message, None),
        400 | 403 | 413 => ErrorData::invalid_params(refused.to_string(), None),
        _ => ErrorData::internal_error(refused.to_string(), None),
    }
}

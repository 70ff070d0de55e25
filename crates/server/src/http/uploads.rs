//! Uploading a file into a session's workspace (an image to attach to a
//! message, a data file for the agent). The body is the file's bytes; the
//! file is written as the agent's user, through real directories only (no
//! link followed, not even one that stays inside; no `..`), atomically.

use std::path::{Component, Path, PathBuf};

use agentd_sandbox::confined::{self, ConfinedError, Written};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiPath, ApiQuery, ApiResult, ErrorBody};
use super::files::{in_workspace, refused};
use super::sessions::owned_session;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UploadQuery {
    /// Where the file goes, relative to the workspace: names separated by
    /// `/`, no `..`, not absolute. Missing directories are made; a regular
    /// file there is replaced.
    #[param(min_length = 1, pattern = r"^[^\x00]+$")]
    pub path: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Uploaded {
    /// The file, relative to the workspace: what an image block's
    /// `{"type": "file", "path": …}` source names.
    pub path: String,
    /// Bytes written.
    pub size: u64,
    /// Whether a file was already there (and was replaced).
    pub replaced: bool,
}

/// Upload a file into the workspace: the request body is its bytes.
#[utoipa::path(post, path = "/v1/sessions/{id}/files", tag = "files",
    params(("id" = String, Path, description = "Session id"), UploadQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "The file's bytes; not empty"),
    responses(
        (status = 201, description = "Written", body = Uploaded),
        (status = 400, description = "An empty body; an invalid path (absolute, `..`, a link \
            on the way), or a directory or special file at it", body = ErrorBody),
        (status = 403, description = "The path cannot be written", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "Over `[server] max_upload_mb` (default 20 MiB)", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn upload_file(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<UploadQuery>,
    body: Body,
) -> ApiResult<(StatusCode, Json<Uploaded>)> {
    let session = owned_session(&state, &user, &id).await?;
    let rel = upload_path(&query.path)?;
    let limit = state.registry.runtime().config.server.max_upload_bytes();
    let too_large = || {
        ApiError::TooLarge(format!(
            "the file is over {limit} bytes ([server] max_upload_mb)"
        ))
    };
    // The body-limit middleware refused a too large Content-Length; this
    // bounds a body streamed without one.
    let bytes = axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX))
        .await
        .map_err(|_| too_large())?;
    if bytes.is_empty() {
        return Err(ApiError::BadRequest(
            "the body is empty: send the file's bytes".into(),
        ));
    }
    let (workspace, identity) = state.sessions.workspace_for_work(session).await?;
    let (raw, target) = (query.path.clone(), rel.clone());
    let size = bytes.len() as u64;
    let written = in_workspace(workspace.root, identity, move |root| {
        confined::write_atomic_no_links(root.root.fd(), &target, &bytes)
            .map_err(|err| refused_upload(&raw, err))
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Uploaded {
            path: rel.display().to_string(),
            size,
            replaced: written == Written::Replaced,
        }),
    ))
}

/// `raw` as a path of plain names beneath the workspace.
fn upload_path(raw: &str) -> ApiResult<PathBuf> {
    let invalid = |why: &str| ApiError::BadRequest(format!("path {raw:?} is invalid: {why}"));
    if raw.is_empty() || raw.contains('\0') {
        return Err(invalid("it is empty or holds a NUL byte"));
    }
    let mut rel = PathBuf::new();
    for component in Path::new(raw).components() {
        match component {
            Component::Normal(name) => rel.push(name),
            Component::CurDir => {}
            Component::ParentDir => return Err(invalid("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(invalid("it must be relative to the workspace"));
            }
        }
    }
    if rel.as_os_str().is_empty() || raw.ends_with('/') {
        return Err(invalid("it names a directory, not a file"));
    }
    Ok(rel)
}

fn refused_upload(raw: &str, err: ConfinedError) -> ApiError {
    match &err {
        ConfinedError::Io(io) if io.raw_os_error() == Some(libc::ELOOP) => ApiError::BadRequest(
            format!("path {raw:?} is invalid: a directory on the way is a symbolic link"),
        ),
        ConfinedError::Io(io) if io.raw_os_error() == Some(libc::ENOENT) => {
            ApiError::BadRequest(format!("path {raw:?} cannot be made"))
        }
        _ => refused(raw, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_paths_are_plain_names_beneath_the_workspace() {
        assert_eq!(
            upload_path("./a/b.png").ok(),
            Some(PathBuf::from("a/b.png"))
        );
        for bad in ["", "../x", "a/../../x", "/etc/passwd", "a/", ".", "a\0b"] {
            assert!(upload_path(bad).is_err(), "{bad:?}");
        }
    }
}

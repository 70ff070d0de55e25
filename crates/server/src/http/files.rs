//! Read-only browsing of a session's workspace. Paths go through
//! [`PathGuard`] (no `..` or symlink out of the workspace), and what is then
//! opened is checked again through `/proc/self/fd`, so a symlink swapped in
//! between the check and the open (the agent can write there) is caught too.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use agentd_sandbox::{PathError, PathGuard};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiPath, ApiQuery, ApiResult, ErrorBody};
use super::sessions::{owned_session, with_local_workspace};

/// Largest file served by `files/content`.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Most entries listed for one directory.
const MAX_ENTRIES: usize = 5000;

#[derive(Debug, Deserialize, IntoParams)]
pub struct FileQuery {
    /// Relative to the workspace (absolute paths inside it work too).
    pub path: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FileList {
    /// The directory, relative to the workspace (`.` for its root).
    pub path: String,
    pub entries: Vec<FileEntry>,
    /// More entries exist than were listed.
    pub truncated: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FileEntry {
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
    pub size: u64,
    pub modified: Option<DateTime<Utc>>,
}

/// List a directory of the workspace.
#[utoipa::path(get, path = "/v1/sessions/{id}/files", tag = "files",
    params(("id" = String, Path, description = "Session id"), FileQuery),
    responses(
        (status = 200, body = FileList),
        (status = 400, description = "Invalid path, or not a directory", body = ErrorBody),
        (status = 403, description = "Outside the workspace", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn list_files(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<FileQuery>,
) -> ApiResult<Json<FileList>> {
    let session = owned_session(&state, &user, &id).await?;
    let session = with_local_workspace(&state, session).await?;
    let raw = query.path.unwrap_or_else(|| ".".into());
    let workspace = PathBuf::from(session.workspace);
    let list = tokio::task::spawn_blocking(move || list_dir(&workspace, &raw))
        .await
        .map_err(|err| ApiError::Internal(err.to_string()))??;
    Ok(Json(list))
}

/// A workspace file's bytes: text as `text/plain`, common images as
/// themselves, anything else as `application/octet-stream`.
#[utoipa::path(get, path = "/v1/sessions/{id}/files/content", tag = "files",
    params(("id" = String, Path, description = "Session id"), FileQuery),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, description = "Invalid path, or a directory", body = ErrorBody),
        (status = 403, description = "Outside the workspace", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "Over 10 MiB", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn file_content(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<FileQuery>,
) -> ApiResult<Response> {
    let session = owned_session(&state, &user, &id).await?;
    let session = with_local_workspace(&state, session).await?;
    let raw = query
        .path
        .ok_or_else(|| ApiError::BadRequest("the query parameter `path` is required".into()))?;
    let workspace = PathBuf::from(session.workspace);
    let bytes = tokio::task::spawn_blocking(move || read_file(&workspace, &raw))
        .await
        .map_err(|err| ApiError::Internal(err.to_string()))??;
    let kind = content_type(&bytes);
    let mut response = Body::from(bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    // Workspace files are the agent's (or a prompt injection's) output: never
    // let a browser run them on the API's origin.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    if kind == OCTET_STREAM {
        headers.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        );
    }
    Ok(response)
}

fn guard(workspace: &Path) -> ApiResult<PathGuard> {
    PathGuard::new(workspace, &[])
        .map_err(|_| ApiError::NotFound("the session's workspace no longer exists".into()))
}

/// Resolve `raw` inside the workspace and open it without following a final
/// symlink; then check where the open file really is.
fn open_inside(guard: &PathGuard, raw: &str) -> ApiResult<(File, PathBuf)> {
    let resolved = guard.resolve(raw).map_err(|err| match err {
        PathError::Outside { .. } => ApiError::Forbidden(err.to_string()),
        PathError::Invalid { .. } => ApiError::BadRequest(err.to_string()),
    })?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&resolved)
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => ApiError::NotFound(format!("no file {raw:?}")),
            _ => ApiError::Forbidden(format!("path {raw:?} cannot be opened")),
        })?;
    let real = std::fs::read_link(fd_path(&file))
        .map_err(|err| ApiError::Internal(format!("checking an opened file: {err}")))?;
    if !guard.is_allowed(&real) {
        return Err(ApiError::Forbidden(format!(
            "path {raw:?} is outside the workspace"
        )));
    }
    Ok((file, real))
}

fn fd_path(file: &File) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

fn list_dir(workspace: &Path, raw: &str) -> ApiResult<FileList> {
    let guard = guard(workspace)?;
    let (file, real) = open_inside(&guard, raw)?;
    let meta = file
        .metadata()
        .map_err(|err| ApiError::Internal(err.to_string()))?;
    if !meta.is_dir() {
        return Err(ApiError::BadRequest(format!("{raw:?} is not a directory")));
    }
    // Read through the open descriptor: the checked directory, not a name.
    let reader = std::fs::read_dir(fd_path(&file))
        .map_err(|err| ApiError::Internal(format!("listing {raw:?}: {err}")))?;
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in reader.flatten() {
        if entries.len() == MAX_ENTRIES {
            truncated = true;
            break;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let kind = if meta.is_symlink() {
            "symlink"
        } else if meta.is_dir() {
            "dir"
        } else if meta.is_file() {
            "file"
        } else {
            "other"
        };
        entries.push(FileEntry {
            name: entry.file_name().to_string_lossy().into_owned(),
            kind: kind.into(),
            size: meta.len(),
            modified: meta.modified().ok().map(DateTime::<Utc>::from),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(FileList {
        path: guard.display(&real),
        entries,
        truncated,
    })
}

fn read_file(workspace: &Path, raw: &str) -> ApiResult<Vec<u8>> {
    use std::io::Read;
    let guard = guard(workspace)?;
    let (file, _) = open_inside(&guard, raw)?;
    let meta = file
        .metadata()
        .map_err(|err| ApiError::Internal(err.to_string()))?;
    if meta.is_dir() {
        return Err(ApiError::BadRequest(format!(
            "{raw:?} is a directory; list it with /files"
        )));
    }
    if !meta.is_file() {
        return Err(ApiError::BadRequest(format!(
            "{raw:?} is not a regular file"
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ApiError::TooLarge(format!(
            "{raw:?} is {} bytes; at most {MAX_FILE_BYTES} are served",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow meanwhile: never read past the cap.
    file.take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|err| ApiError::Internal(format!("reading {raw:?}: {err}")))?;
    Ok(bytes)
}

const OCTET_STREAM: &str = "application/octet-stream";

/// Sniffed, never taken from the name: text, a few image formats, or bytes.
/// SVG and HTML are served as plain text (they could run script).
fn content_type(bytes: &[u8]) -> &'static str {
    const MAGIC: [(&[u8], &str); 4] = [
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF8", "image/gif"),
        (b"RIFF", "image/webp"),
    ];
    for (magic, kind) in MAGIC {
        if bytes.starts_with(magic) && (kind != "image/webp" || bytes.get(8..12) == Some(b"WEBP")) {
            return kind;
        }
    }
    if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        "text/plain; charset=utf-8"
    } else {
        OCTET_STREAM
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_sniffed() {
        assert_eq!(content_type(b"hello\n"), "text/plain; charset=utf-8");
        assert_eq!(content_type(b"<svg onload=x>"), "text/plain; charset=utf-8");
        assert_eq!(content_type(b"\x89PNG\r\n\x1a\nrest"), "image/png");
        assert_eq!(content_type(b"\x00\x01\x02"), OCTET_STREAM);
        assert_eq!(content_type(&[0xff, 0xfe, 0x41]), OCTET_STREAM);
    }
}

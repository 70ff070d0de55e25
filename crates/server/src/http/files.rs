//! Read-only browsing of a session's workspace, by descriptors. The agent
//! can swap any file or directory of its workspace for a symlink at any
//! moment, so no path is trusted twice: the workspace is held open and what
//! is asked for is opened beneath it (`openat2(RESOLVE_BENEATH)`, see
//! [`agentd_sandbox::confined`]), where no link can lead outside whatever is
//! swapped in meanwhile (links that stay inside are followed). What is
//! listed or read is the very directory or file opened, looked at through
//! its descriptor: a FIFO or a device is refused before anything could block
//! on it. The work runs as the session owner's agent user, so only what that
//! user may read is served.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use agentd_sandbox::confined::{self, ConfinedError, FsIdentity, Root};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use rustix::fs::{AtFlags, FileType};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiPath, ApiQuery, ApiResult, ErrorBody};
use super::sessions::owned_session;

/// Largest file served by `files/content`.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Most entries listed for one directory.
const MAX_ENTRIES: usize = 5000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileQuery {
    /// The directory, relative to the workspace (absolute paths inside it
    /// work too); its root when omitted.
    #[param(nullable = false, min_length = 1, pattern = r"^[^\x00]+$")]
    pub path: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContentQuery {
    /// The file, relative to the workspace (absolute paths inside it work too).
    #[param(min_length = 1, pattern = r"^[^\x00]+$")]
    pub path: String,
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
    let (workspace, identity) = state.sessions.workspace(session).await?;
    let raw = query.path.unwrap_or_else(|| ".".into());
    let list = in_workspace(workspace.root, identity, move |root| list_dir(root, &raw)).await?;
    Ok(Json(list))
}

/// A workspace file's bytes: text as `text/plain`, common images as
/// themselves, anything else as `application/octet-stream`.
#[utoipa::path(get, path = "/v1/sessions/{id}/files/content", tag = "files",
    params(("id" = String, Path, description = "Session id"), ContentQuery),
    responses(
        (status = 200, description = "The file: UTF-8 text, a PNG/JPEG/GIF/WebP image, or other bytes",
            content(
                (String = "text/plain"),
                (Vec<u8> = "image/png"),
                (Vec<u8> = "image/jpeg"),
                (Vec<u8> = "image/gif"),
                (Vec<u8> = "image/webp"),
                (Vec<u8> = "application/octet-stream"),
            )),
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
    ApiQuery(query): ApiQuery<ContentQuery>,
) -> ApiResult<Response> {
    let session = owned_session(&state, &user, &id).await?;
    let (workspace, identity) = state.sessions.workspace(session).await?;
    let raw = query.path;
    let bytes = in_workspace(workspace.root, identity, move |root| read_file(root, &raw)).await?;
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

/// Run `work` on a blocking thread with the workspace held open (opened by
/// the server: the agent's user may not reach the data dir), as `identity`.
pub(super) async fn in_workspace<T: Send + 'static>(
    root: Root,
    identity: Option<FsIdentity>,
    work: impl FnOnce(&Workspace) -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(move || {
        // Absolute paths name files by the canonical path as well as the given one.
        let canonical = root.path().to_path_buf();
        let workspace = Workspace { root, canonical };
        match identity {
            Some(identity) => identity.run(|| work(&workspace)).map_err(|err| {
                ApiError::Internal(format!("acting as uid {}: {err}", identity.uid))
            })?,
            None => work(&workspace),
        }
    })
    .await
    .map_err(|err| ApiError::Internal(err.to_string()))?
}

pub(super) struct Workspace {
    pub(super) root: Root,
    canonical: PathBuf,
}

impl Workspace {
    /// `raw` relative to the workspace; an absolute path must lie inside it.
    /// Only the text is looked at: the kernel resolves it, beneath the root.
    pub(super) fn relative(&self, raw: &str) -> ApiResult<PathBuf> {
        if raw.is_empty() || raw.contains('\0') {
            return Err(ApiError::BadRequest(format!(
                "path {raw:?} is invalid: it is empty or holds a NUL byte"
            )));
        }
        let path = Path::new(raw);
        if raw.starts_with('~') {
            return Err(outside(raw));
        }
        if !path.is_absolute() {
            return Ok(path.to_path_buf());
        }
        [self.root.path(), self.canonical.as_path()]
            .into_iter()
            .find_map(|base| path.strip_prefix(base).ok())
            .map(Path::to_path_buf)
            .ok_or_else(|| outside(raw))
    }

    /// The opened `fd`'s path relative to the workspace, for display: what
    /// the kernel says it is now, else the path as asked.
    fn display(&self, fd: &OwnedFd, rel: &Path) -> String {
        let now = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok();
        let inside = now.as_deref().and_then(|now| {
            [self.canonical.as_path(), self.root.path()]
                .into_iter()
                .find_map(|base| now.strip_prefix(base).ok())
                .map(Path::to_path_buf)
        });
        let shown = inside.unwrap_or_else(|| {
            rel.components()
                .filter(|c| *c != std::path::Component::CurDir)
                .collect()
        });
        if shown.as_os_str().is_empty() {
            ".".into()
        } else {
            shown.display().to_string()
        }
    }
}

fn outside(raw: &str) -> ApiError {
    ApiError::Forbidden(format!("path {raw:?} is outside the workspace"))
}

/// The answer for a path the confined open refused.
pub(super) fn refused(raw: &str, err: ConfinedError) -> ApiError {
    match err {
        ConfinedError::Escapes => outside(raw),
        ConfinedError::Kind {
            found: "a directory",
            wanted,
        } => ApiError::BadRequest(format!(
            "{raw:?} is a directory, not {wanted}; list it with /files"
        )),
        ConfinedError::Kind { found, wanted } if found.starts_with("not ") => {
            ApiError::BadRequest(format!("{raw:?} is not {wanted}"))
        }
        ConfinedError::Kind { found, wanted } => {
            ApiError::BadRequest(format!("{raw:?} is {found}, not {wanted}"))
        }
        ConfinedError::ReadOnly => ApiError::Forbidden(format!("{raw:?} is on a read-only mount")),
        ConfinedError::TooLarge { size, limit } => ApiError::TooLarge(format!(
            "{raw:?} is {size} bytes; at most {limit} are served"
        )),
        ConfinedError::Io(err) => match err.raw_os_error() {
            Some(libc::ENOENT) => ApiError::NotFound(format!("no file {raw:?}")),
            Some(libc::ENOTDIR) => ApiError::BadRequest(format!(
                "path {raw:?} is invalid: a part of it is not a directory"
            )),
            Some(libc::ELOOP) => ApiError::BadRequest(format!(
                "path {raw:?} is invalid: too many levels of symbolic links"
            )),
            Some(libc::EACCES | libc::EPERM) => {
                ApiError::Forbidden(format!("path {raw:?} cannot be opened"))
            }
            _ => ApiError::Internal(format!("opening {raw:?}: {err}")),
        },
    }
}

fn list_dir(workspace: &Workspace, raw: &str) -> ApiResult<FileList> {
    let rel = workspace.relative(raw)?;
    let dir = confined::open_dir(workspace.root.fd(), &rel).map_err(|err| refused(raw, err))?;
    // Read through the open descriptor, each entry looked at through it.
    let mut listing = rustix::fs::Dir::read_from(&dir)
        .map_err(|err| ApiError::Internal(format!("listing {raw:?}: {err}")))?;
    let mut entries = Vec::new();
    let mut truncated = false;
    while let Some(entry) = listing.read() {
        let Ok(entry) = entry else { break };
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        if entries.len() == MAX_ENTRIES {
            truncated = true;
            break;
        }
        // Gone since the listing: not listed.
        let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let kind = match confined::file_type(&stat) {
            FileType::Symlink => "symlink",
            FileType::Directory => "dir",
            FileType::RegularFile => "file",
            _ => "other",
        };
        entries.push(FileEntry {
            name: String::from_utf8_lossy(name.to_bytes()).into_owned(),
            kind: kind.into(),
            size: stat.st_size.max(0) as u64,
            modified: modified(&stat),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(FileList {
        path: workspace.display(&dir, &rel),
        entries,
        truncated,
    })
}

// The stat fields' integer types differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn modified(stat: &rustix::fs::Stat) -> Option<DateTime<Utc>> {
    let nanos = u32::try_from(stat.st_mtime_nsec).ok()?;
    DateTime::<Utc>::from_timestamp(stat.st_mtime as i64, nanos)
}

fn read_file(workspace: &Workspace, raw: &str) -> ApiResult<Vec<u8>> {
    let rel = workspace.relative(raw)?;
    let (file, stat) =
        confined::open_regular(workspace.root.fd(), &rel).map_err(|err| refused(raw, err))?;
    let size = stat.st_size.max(0) as u64;
    if size > MAX_FILE_BYTES {
        return Err(refused(
            raw,
            ConfinedError::TooLarge {
                size,
                limit: MAX_FILE_BYTES,
            },
        ));
    }
    let mut bytes = Vec::with_capacity(size as usize);
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
    if let Some(kind) = agentd_protocol::sniff_image(bytes) {
        return kind;
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

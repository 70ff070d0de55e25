//! A message's `content` over the HTTP API: its OpenAPI shape, and the
//! checked blocks of [`crate::content`] with image files read from the
//! session's workspace (say, one uploaded with `POST …/files`), as the
//! agent's user, and sent as base64 like any other, so the transcript and
//! the cluster's queue hold the bytes the model saw.

use agentd_protocol::{ContentBlock, MAX_IMAGE_BYTES, image_block};
use agentd_sandbox::confined;
use agentd_store::SessionRecord;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use super::AppState;
use super::error::{ApiError, ApiResult};
use super::files::{in_workspace, refused};
use crate::content::{CheckedBlock, ContentError, InputBlock};

/// A message's content: text, or content blocks (OpenAPI document only; the
/// handler reads the JSON itself, to say which block is wrong).
pub struct MessageContentDoc;

impl PartialSchema for MessageContentDoc {
    fn schema() -> RefOr<Schema> {
        let text = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("The message's text; not all blank."))
            .min_length(Some(1))
            .pattern(Some(r"\S"));
        let blocks = ArrayBuilder::new()
            .description(Some("Content blocks, at least one."))
            .items(Ref::from_schema_name(InputBlock::name()))
            .min_items(Some(1));
        OneOfBuilder::new().item(text).item(blocks).into()
    }
}

impl ToSchema for MessageContentDoc {
    fn name() -> std::borrow::Cow<'static, str> {
        "MessageContent".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((InputBlock::name().into(), InputBlock::schema()));
        InputBlock::schemas(schemas);
    }
}

impl From<ContentError> for ApiError {
    fn from(err: ContentError) -> Self {
        match err {
            ContentError::Invalid(message) => ApiError::BadRequest(message),
            ContentError::TooLarge(message) => ApiError::TooLarge(message),
        }
    }
}

/// `content`'s checked blocks; images named by a path are read from
/// `session`'s workspace.
pub(super) async fn to_content_blocks(
    state: &AppState,
    session: &SessionRecord,
    checked: Vec<CheckedBlock>,
) -> ApiResult<Vec<ContentBlock>> {
    let mut out = Vec::with_capacity(checked.len());
    for block in checked {
        out.push(match block {
            CheckedBlock::Ready(block) => block,
            CheckedBlock::WorkspaceImage { at, path } => {
                let bytes = read_workspace_image(state, session, path.clone()).await?;
                image_block(&bytes)
                    .map_err(|err| ContentError::image(&format!("{at} ({path:?})"), err))?
            }
        });
    }
    Ok(out)
}

/// A workspace file's bytes, read as the agent's user through the files
/// API's confinement; over [`MAX_IMAGE_BYTES`] is refused unread.
async fn read_workspace_image(
    state: &AppState,
    session: &SessionRecord,
    raw: String,
) -> ApiResult<Vec<u8>> {
    let (workspace, identity) = state.sessions.workspace(session.clone()).await?;
    in_workspace(workspace.root, identity, move |root| {
        let rel = root.relative(&raw)?;
        confined::read_regular(root.root.fd(), &rel, MAX_IMAGE_BYTES as u64)
            .map_err(|err| refused(&raw, err))
    })
    .await
}

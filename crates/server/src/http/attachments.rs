//! A message's `content` as the API takes it (text, or an array of blocks in
//! Anthropic's shapes) checked and made into the transcript's content
//! blocks. An image may name a file of the workspace (say, one uploaded with
//! `POST …/files`): it is read there, as the agent's user, and sent as base64
//! like any other, so the transcript and the cluster's queue hold the bytes
//! the model saw.

use agentd_protocol::{ContentBlock, MAX_IMAGE_BYTES, sniff_image};
use agentd_sandbox::confined;
use agentd_store::SessionRecord;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use super::AppState;
use super::error::{ApiError, ApiResult};
use super::files::{in_workspace, refused};

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

/// One block of a message.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum InputBlock {
    Text {
        /// Not all blank.
        #[schema(min_length = 1, pattern = r"\S")]
        text: String,
    },
    /// A PNG, JPEG, GIF or WebP image of at most 5 MiB.
    Image { source: ImageSource },
    /// A PDF (base64) or plain text.
    Document {
        source: DocumentSource,
        /// Shown to the model with the document.
        title: Option<String>,
    },
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ImageSource {
    /// The image's bytes; they must be of `media_type` (told by their magic
    /// bytes).
    Base64 {
        media_type: ImageMediaType,
        /// Standard base64.
        #[schema(min_length = 1)]
        data: String,
    },
    /// An image file of the session's workspace, relative to it (e.g. the
    /// `path` `POST …/files` answered with).
    File {
        #[schema(min_length = 1, pattern = r"^[^\x00]+$")]
        path: String,
    },
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
pub enum ImageMediaType {
    #[serde(rename = "image/png")]
    Png,
    #[serde(rename = "image/jpeg")]
    Jpeg,
    #[serde(rename = "image/gif")]
    Gif,
    #[serde(rename = "image/webp")]
    Webp,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DocumentSource {
    /// A PDF.
    Base64 {
        media_type: PdfMediaType,
        /// Standard base64.
        #[schema(min_length = 1)]
        data: String,
    },
    /// Plain text.
    Text {
        media_type: TextMediaType,
        #[schema(min_length = 1)]
        data: String,
    },
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
pub enum PdfMediaType {
    #[serde(rename = "application/pdf")]
    Pdf,
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
pub enum TextMediaType {
    #[serde(rename = "text/plain")]
    Plain,
}

/// `content` as sent: a string, or an array of [`InputBlock`]s.
pub(super) fn parse_content(content: Value) -> ApiResult<Vec<InputBlock>> {
    match content {
        Value::String(text) if text.trim().is_empty() => {
            Err(ApiError::BadRequest("content must not be empty".into()))
        }
        Value::String(text) => Ok(vec![InputBlock::Text { text }]),
        Value::Array(blocks) if blocks.is_empty() => Err(ApiError::BadRequest(
            "content must hold at least one block".into(),
        )),
        Value::Array(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(index, block)| {
                serde_json::from_value(block).map_err(|err| {
                    ApiError::BadRequest(format!("content[{index}] is not a valid block: {err}"))
                })
            })
            .collect(),
        _ => Err(ApiError::BadRequest(
            "content must be a string or an array of content blocks".into(),
        )),
    }
}

/// The blocks checked and made transcript blocks; images named by a path
/// are read from `session`'s workspace.
pub(super) async fn to_content_blocks(
    state: &AppState,
    session: &SessionRecord,
    blocks: Vec<InputBlock>,
) -> ApiResult<Vec<ContentBlock>> {
    let mut out = Vec::with_capacity(blocks.len());
    for (index, block) in blocks.into_iter().enumerate() {
        let at = format!("content[{index}]");
        out.push(match block {
            InputBlock::Text { text } if text.trim().is_empty() => {
                return Err(ApiError::BadRequest(format!("{at}.text must not be empty")));
            }
            InputBlock::Text { text } => ContentBlock::Text { text },
            InputBlock::Image {
                source: ImageSource::Base64 { media_type, data },
            } => {
                let bytes = decode(&at, &data)?;
                image_block(&at, media_type.as_str(), bytes)?
            }
            InputBlock::Image {
                source: ImageSource::File { path },
            } => {
                let bytes = read_workspace_image(state, session, path.clone()).await?;
                let media_type = sniff_image(&bytes).ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "{at}: {path:?} is not a PNG, JPEG, GIF or WebP image"
                    ))
                })?;
                image_block(&at, media_type, bytes)?
            }
            InputBlock::Document { source, title } => document_block(&at, source, title)?,
        });
    }
    Ok(out)
}

impl ImageMediaType {
    fn as_str(self) -> &'static str {
        match self {
            ImageMediaType::Png => "image/png",
            ImageMediaType::Jpeg => "image/jpeg",
            ImageMediaType::Gif => "image/gif",
            ImageMediaType::Webp => "image/webp",
        }
    }
}

fn decode(at: &str, data: &str) -> ApiResult<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|err| ApiError::BadRequest(format!("{at}: data is not valid base64: {err}")))
}

/// An image block of `bytes`, which must be a `media_type` image (by their
/// magic bytes: a provider refuses a mislabelled one) of at most
/// [`MAX_IMAGE_BYTES`].
fn image_block(at: &str, media_type: &str, bytes: Vec<u8>) -> ApiResult<ContentBlock> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ApiError::TooLarge(format!(
            "{at}: the image is {} bytes; at most {MAX_IMAGE_BYTES} are sent to a model",
            bytes.len()
        )));
    }
    match sniff_image(&bytes) {
        Some(found) if found == media_type => {}
        found => {
            return Err(ApiError::BadRequest(format!(
                "{at}: the data is not a {media_type} image (it looks like {})",
                found.unwrap_or("no image format")
            )));
        }
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(ContentBlock::base64_image(media_type, data))
}

fn document_block(
    at: &str,
    source: DocumentSource,
    title: Option<String>,
) -> ApiResult<ContentBlock> {
    let source = match source {
        DocumentSource::Base64 {
            data,
            media_type: PdfMediaType::Pdf,
        } => {
            if !decode(at, &data)?.starts_with(b"%PDF-") {
                return Err(ApiError::BadRequest(format!(
                    "{at}: the data is not a PDF (no %PDF- header)"
                )));
            }
            json!({"type": "base64", "media_type": "application/pdf", "data": data})
        }
        DocumentSource::Text { data, .. } if data.is_empty() => {
            return Err(ApiError::BadRequest(format!("{at}: the document is empty")));
        }
        DocumentSource::Text {
            data,
            media_type: TextMediaType::Plain,
        } => {
            json!({"type": "text", "media_type": "text/plain", "data": data})
        }
    };
    Ok(ContentBlock::Document { source, title })
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

//! A message's `content` as agentd takes it: text, or an array of blocks in
//! Anthropic's shapes (text, base64 images and documents, image files of
//! the workspace), checked and made into the transcript's content blocks.
//! The part that needs no workspace is here, for every caller (the HTTP
//! API, `agentd run --input-format stream-json`); reading an image file of
//! a session's workspace is the HTTP API's (`http::attachments`).

use agentd_protocol::{ContentBlock, ImageError, base64_image_block, decode_base64};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

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

/// Why a message's content is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("{0}")]
    Invalid(String),
    /// An image over [`agentd_protocol::MAX_IMAGE_BYTES`].
    #[error("{0}")]
    TooLarge(String),
}

impl ContentError {
    /// `err` about the block at `at` (`content[2]`).
    pub fn image(at: &str, err: ImageError) -> Self {
        match err {
            ImageError::TooLarge { .. } => ContentError::TooLarge(format!("{at}: {err}")),
            other => ContentError::Invalid(format!("{at}: {other}")),
        }
    }
}

/// A block checked: ready for the transcript, or an image file of the
/// workspace still to be read (by a caller that has one).
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedBlock {
    Ready(ContentBlock),
    WorkspaceImage { at: String, path: String },
}

/// `content` as sent: a string, or an array of [`InputBlock`]s, each
/// checked (base64 decoded and sniffed; the data sent is kept as is).
pub fn check_content(content: Value) -> Result<Vec<CheckedBlock>, ContentError> {
    let blocks = match content {
        Value::String(text) if text.trim().is_empty() => {
            return Err(ContentError::Invalid("content must not be empty".into()));
        }
        Value::String(text) => return Ok(vec![CheckedBlock::Ready(ContentBlock::Text { text })]),
        Value::Array(blocks) if blocks.is_empty() => {
            return Err(ContentError::Invalid(
                "content must hold at least one block".into(),
            ));
        }
        Value::Array(blocks) => blocks,
        _ => {
            return Err(ContentError::Invalid(
                "content must be a string or an array of content blocks".into(),
            ));
        }
    };
    let parsed: Vec<InputBlock> = blocks
        .into_iter()
        .enumerate()
        .map(|(index, block)| {
            serde_json::from_value(block).map_err(|err| {
                ContentError::Invalid(format!("content[{index}] is not a valid block: {err}"))
            })
        })
        .collect::<Result<_, _>>()?;
    parsed
        .into_iter()
        .enumerate()
        .map(|(index, block)| check_block(&format!("content[{index}]"), block))
        .collect()
}

/// `content` for a caller with no workspace to read image files from: an
/// image `{"type": "file"}` source is refused.
pub fn content_without_workspace(content: Value) -> Result<Vec<ContentBlock>, ContentError> {
    check_content(content)?
        .into_iter()
        .map(|block| match block {
            CheckedBlock::Ready(block) => Ok(block),
            CheckedBlock::WorkspaceImage { at, .. } => Err(ContentError::Invalid(format!(
                "{at}: an image file source is only for a session's workspace over the \
                 HTTP API; send the image as base64"
            ))),
        })
        .collect()
}

fn check_block(at: &str, block: InputBlock) -> Result<CheckedBlock, ContentError> {
    Ok(CheckedBlock::Ready(match block {
        InputBlock::Text { text } if text.trim().is_empty() => {
            return Err(ContentError::Invalid(format!(
                "{at}.text must not be empty"
            )));
        }
        InputBlock::Text { text } => ContentBlock::Text { text },
        InputBlock::Image {
            source: ImageSource::Base64 { media_type, data },
        } => base64_image_block(media_type.as_str(), data)
            .map_err(|err| ContentError::image(at, err))?,
        InputBlock::Image {
            source: ImageSource::File { path },
        } => {
            return Ok(CheckedBlock::WorkspaceImage {
                at: at.into(),
                path,
            });
        }
        InputBlock::Document { source, title } => document_block(at, source, title)?,
    }))
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

fn document_block(
    at: &str,
    source: DocumentSource,
    title: Option<String>,
) -> Result<ContentBlock, ContentError> {
    let source = match source {
        DocumentSource::Base64 {
            data,
            media_type: PdfMediaType::Pdf,
        } => {
            let bytes = decode_base64(&data).map_err(|err| ContentError::image(at, err))?;
            if !bytes.starts_with(b"%PDF-") {
                return Err(ContentError::Invalid(format!(
                    "{at}: the data is not a PDF (no %PDF- header)"
                )));
            }
            json!({"type": "base64", "media_type": "application/pdf", "data": data})
        }
        DocumentSource::Text { data, .. } if data.is_empty() => {
            return Err(ContentError::Invalid(format!(
                "{at}: the document is empty"
            )));
        }
        DocumentSource::Text {
            data,
            media_type: TextMediaType::Plain,
        } => json!({"type": "text", "media_type": "text/plain", "data": data}),
    };
    Ok(ContentBlock::Document { source, title })
}

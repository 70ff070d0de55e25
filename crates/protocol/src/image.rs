//! Images sent to a model: their formats (told by magic bytes, never by a
//! name), the size cap, and one way to make an image block of bytes or of
//! base64 someone sent, so the HTTP API, `agentd run --image` and `Read`
//! refuse alike.

use base64::Engine as _;
use serde_json::Value;

use crate::ContentBlock;

/// The largest image sent to a model, in bytes (decoded): Anthropic's
/// limit for one image.
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// The image formats every provider takes, as media types.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// An Anthropic image `source` object for base64 `data`.
pub fn base64_image_source(media_type: &str, data: String) -> Value {
    serde_json::json!({"type": "base64", "media_type": media_type, "data": data})
}

/// The image format of `bytes`, by their magic bytes (never by a name):
/// PNG, JPEG, GIF or WebP; `None` for anything else.
pub fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    const MAGIC: [(&[u8], &str); 4] = [
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF8", "image/gif"),
        (b"RIFF", "image/webp"),
    ];
    MAGIC.into_iter().find_map(|(magic, kind)| {
        let webp_ok = kind != "image/webp" || bytes.get(8..12) == Some(b"WEBP");
        (bytes.starts_with(magic) && webp_ok).then_some(kind)
    })
}

/// Why bytes (or base64) cannot be sent to a model as an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("the image is {bytes} bytes; at most {MAX_IMAGE_BYTES} are sent to a model")]
    TooLarge { bytes: usize },
    #[error("not a PNG, JPEG, GIF or WebP image")]
    NotAnImage,
    #[error("the data is not valid base64: {0}")]
    NotBase64(String),
    /// Base64 whose bytes are not the media type it came labelled with (a
    /// provider refuses a mislabelled image).
    #[error("the data is not {declared} (it looks like {})", found.unwrap_or("no image format"))]
    Mislabelled {
        declared: String,
        found: Option<&'static str>,
    },
}

/// An image block of `bytes`: their format sniffed, at most
/// [`MAX_IMAGE_BYTES`].
pub fn image_block(bytes: &[u8]) -> Result<ContentBlock, ImageError> {
    let media_type = sniff_image(bytes).ok_or(ImageError::NotAnImage)?;
    Ok(ContentBlock::Image {
        source: sniffed_image_source(media_type, bytes)?,
    })
}

/// The base64 `source` of bytes already sniffed as `media_type` (say, from
/// a file's first bytes), at most [`MAX_IMAGE_BYTES`].
pub fn sniffed_image_source(media_type: &str, bytes: &[u8]) -> Result<Value, ImageError> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { bytes: bytes.len() });
    }
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(base64_image_source(media_type, data))
}

/// An image block of base64 `data` someone sent labelled `media_type`: it
/// must decode to at most [`MAX_IMAGE_BYTES`] of that format. The data is
/// kept as given, not encoded again.
pub fn base64_image_block(media_type: &str, data: String) -> Result<ContentBlock, ImageError> {
    let bytes = decode_base64(&data)?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { bytes: bytes.len() });
    }
    match sniff_image(&bytes) {
        Some(found) if found == media_type => Ok(ContentBlock::base64_image(media_type, data)),
        found => Err(ImageError::Mislabelled {
            declared: media_type.into(),
            found,
        }),
    }
}

/// Standard base64, decoded.
pub fn decode_base64(data: &str) -> Result<Vec<u8>, ImageError> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|err| ImageError::NotBase64(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn bytes_become_a_sniffed_block_and_sent_base64_is_kept_as_given() {
        let block = image_block(PNG).unwrap();
        let ContentBlock::Image { source } = &block else {
            panic!("{block:?}")
        };
        assert_eq!(source["media_type"], "image/png");
        let data = source["data"].as_str().unwrap().to_string();
        assert_eq!(base64_image_block("image/png", data.clone()), Ok(block));
        assert_eq!(image_block(b"hello"), Err(ImageError::NotAnImage));
        assert_eq!(
            base64_image_block("image/jpeg", data)
                .unwrap_err()
                .to_string(),
            "the data is not image/jpeg (it looks like image/png)"
        );
        assert!(matches!(
            base64_image_block("image/png", "%%".into()),
            Err(ImageError::NotBase64(_))
        ));
    }

    #[test]
    fn an_image_over_the_cap_is_refused() {
        let mut huge = PNG.to_vec();
        huge.resize(MAX_IMAGE_BYTES + 1, 0);
        let too_large = Err(ImageError::TooLarge {
            bytes: MAX_IMAGE_BYTES + 1,
        });
        assert_eq!(image_block(&huge), too_large);
        let data = base64::engine::general_purpose::STANDARD.encode(&huge);
        assert_eq!(base64_image_block("image/png", data), too_large);
    }
}

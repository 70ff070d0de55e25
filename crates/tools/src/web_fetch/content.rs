//! Which responses WebFetch reads, and how their bytes become text.

/// How a body is turned into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Converted to markdown.
    Html,
    /// Returned as is.
    Text,
}

/// Judge a `Content-Type` header before the body is read: `Ok(None)` means
/// there is none and the body must be sniffed.
pub(crate) fn classify(content_type: Option<&str>) -> Result<Option<Kind>, String> {
    let Some(header) = content_type else {
        return Ok(None);
    };
    let mime = essence(header);
    if mime.is_empty() {
        return Ok(None);
    }
    if mime == "text/html" || mime == "application/xhtml+xml" {
        return Ok(Some(Kind::Html));
    }
    let textual = mime.starts_with("text/")
        || matches!(
            mime.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-javascript"
        )
        || (mime.starts_with("application/")
            && (mime.ends_with("+json") || mime.ends_with("+xml")));
    if textual {
        Ok(Some(Kind::Text))
    } else {
        Err(format!(
            "the response's content type is {header:?}, which WebFetch cannot read; it only \
             reads text (text/*, HTML, JSON, XML, JavaScript)"
        ))
    }
}

/// The lower-case `type/subtype` of a `Content-Type` value.
fn essence(header: &str) -> String {
    header
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Guess the kind of a body sent without a content type: text if it is UTF-8
/// (a character cut at the end by the size cap is fine) without NUL bytes.
pub(crate) fn sniff(body: &[u8]) -> Option<Kind> {
    if body.contains(&0) {
        return None;
    }
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        // `error_len() == None`: the input ends mid-character, which a cut causes.
        Err(err) if err.error_len().is_none() => {
            std::str::from_utf8(&body[..err.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return None,
    };
    let start: String = text
        .trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
        .chars()
        .take(15)
        .collect::<String>()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Some(Kind::Html)
    } else {
        Some(Kind::Text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn content_types() {
        for (header, kind) in [
            ("text/html; charset=utf-8", Kind::Html),
            ("TEXT/HTML", Kind::Html),
            ("application/xhtml+xml", Kind::Html),
            ("text/plain", Kind::Text),
            ("text/markdown", Kind::Text),
            ("application/json", Kind::Text),
            ("application/ld+json", Kind::Text),
            ("application/problem+json; charset=utf-8", Kind::Text),
            ("application/xml", Kind::Text),
            ("application/rss+xml", Kind::Text),
            ("application/javascript", Kind::Text),
        ] {
            assert_eq!(classify(Some(header)), Ok(Some(kind)), "{header}");
        }
        for header in [
            "image/png",
            "application/pdf",
            "application/octet-stream",
            "video/mp4",
            "application/zip",
        ] {
            let err = classify(Some(header)).unwrap_err();
            assert!(err.contains(header), "{err}");
        }
        assert_eq!(classify(None), Ok(None));
        assert_eq!(classify(Some("  ")), Ok(None));
    }

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"plain words"), Some(Kind::Text));
        assert_eq!(sniff(b"\n <!DOCTYPE html><p>x"), Some(Kind::Html));
        assert_eq!(sniff(b"<HTML><body>"), Some(Kind::Html));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), None);
        assert_eq!(sniff(&[0xff, 0xfe, 0x41]), None);
        // "é" cut in half by the size cap.
        assert_eq!(sniff(&[b'a', 0xc3]), Some(Kind::Text));
    }
}

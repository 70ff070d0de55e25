//! `Read`: a text file's lines, numbered like `cat -n`; an image (PNG,
//! JPEG, GIF, WebP by its magic bytes) as an image the model sees.
use std::io::{BufRead, BufReader, Read as _};

use agentd_protocol::{ImageError, MAX_IMAGE_BYTES, sniff_image, sniffed_image_source};

use agentd_sandbox::confined::{self, ConfinedError};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::host_fs::{Target, describe, is_directory, is_not_found};
use crate::tool_result::{
    MAX_LINE_CHARS, NOTE_RESERVE, numbered_line, run_blocking_result, truncate_line,
};
use crate::{ToolContext, ToolResult, TypedTool};

const DEFAULT_LINE_LIMIT: usize = 2000;
/// Bytes inspected for NUL bytes to decide a file is binary.
const BINARY_SNIFF_BYTES: usize = 8192;
/// Bytes kept of one line; enough for `MAX_LINE_CHARS` characters of any UTF-8.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4;

#[derive(Debug, Deserialize)]
pub(crate) struct ReadInput {
    file_path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[derive(Debug, Default)]
pub struct ReadTool;

#[async_trait]
impl TypedTool for ReadTool {
    const NAME: &'static str = "Read";
    const DESCRIPTION: &'static str = "Read a text file. Lines are returned numbered like `cat -n` \
(number, tab, text); the numbers are not part of the file. By default up to 2000 lines \
from the start; for longer files pass `offset` (the 1-based line to start at) and `limit` \
(how many lines). Lines longer than 2000 characters are cut. Relative paths are resolved \
against the workspace. PNG, JPEG, GIF and WebP images (up to 5 MiB) are shown to you \
as images. Directories (use LS), other binary files and special files (pipes, \
devices, sockets) are refused.";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["file_path"];
    type Input = ReadInput;

    fn properties() -> Value {
        json!({
            "file_path": {"type": "string", "description": "The file to read (absolute, or relative to the workspace)."},
            "offset": {"type": "integer", "minimum": 0, "description": "Line number to start at (1-based). Only for files too long to read at once."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read (default 2000)."}
        })
    }

    async fn run(&self, input: ReadInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let file = Target::resolve(ctx, "file_path", &input.file_path)?;
        let window = LineWindow {
            first: input.offset.unwrap_or(1).max(1),
            limit: input.limit.unwrap_or(DEFAULT_LINE_LIMIT),
            char_budget: ctx.result_cap.saturating_sub(NOTE_RESERVE),
        };
        Ok(run_blocking_result(ctx, move || read_file(&file, window)).await)
    }
}

#[derive(Debug, Clone, Copy)]
struct LineWindow {
    /// 1-based number of the first line to show.
    first: usize,
    limit: usize,
    /// Stop before the output passes this many characters.
    char_budget: usize,
}

/// The file's numbered lines, or the image it is.
fn read_file(target: &Target, window: LineWindow) -> Result<ToolResult, String> {
    let shown = &target.shown;
    // Opened beneath the root, and only if regular: a FIFO or a device is
    // refused before anything could block on it.
    let (mut file, stat) = target
        .guard
        .confined(&target.path, confined::open_regular)
        .map_err(|err| describe_open_error(shown, &err))?;
    let size = stat.st_size as u64;
    let mut head = Vec::with_capacity(BINARY_SNIFF_BYTES);
    (&mut file)
        .take(BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|err| format!("cannot read {shown}: {err}"))?;
    if let Some(media_type) = sniff_image(&head) {
        return read_image(file, head, size, media_type, shown);
    }
    if head.contains(&0) {
        return Err(format!(
            "{shown} is a binary file, {size} bytes; Read only shows text"
        ));
    }
    if size == 0 {
        return Ok(ToolResult::ok(format!("(the file {shown} is empty)")));
    }
    let mut reader = BufReader::new(head.as_slice().chain(file));

    let mut output = String::new();
    let mut line = Vec::new();
    let mut number = 0;
    let mut shown_lines = 0;
    loop {
        let more = read_line_capped(&mut reader, &mut line)
            .map_err(|err| format!("cannot read {shown}: {err}"))?;
        if !more {
            break;
        }
        number += 1;
        if number < window.first {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let formatted = numbered_line(
            number,
            &truncate_line(text.trim_end_matches('\n').trim_end_matches('\r')),
        );
        // At least one line is always shown, whatever the budget.
        let stop_reason = if shown_lines == window.limit {
            Some("the line limit")
        } else if shown_lines > 0 && output.len() + 1 + formatted.len() > window.char_budget {
            Some("the size limit")
        } else {
            None
        };
        if let Some(reason) = stop_reason {
            output.push_str(&format!(
                "\n[stopped at {reason}: showed lines {}-{}; the file continues — read more with offset={number}]",
                window.first,
                number - 1
            ));
            return Ok(ToolResult::ok(output));
        }
        if shown_lines > 0 {
            output.push('\n');
        }
        output.push_str(&formatted);
        shown_lines += 1;
    }
    if shown_lines == 0 {
        return Ok(ToolResult::ok(format!(
            "(the file {shown} has {number} lines; offset {} is past the end)",
            window.first
        )));
    }
    Ok(ToolResult::ok(output))
}

/// The rest of an image file after its `head` (sniffed as `media_type`),
/// as an image result; one over [`MAX_IMAGE_BYTES`] is refused (no model
/// takes it).
fn read_image(
    file: std::fs::File,
    head: Vec<u8>,
    size: u64,
    media_type: &str,
    shown: &str,
) -> Result<ToolResult, String> {
    let too_large = |size: u64| {
        format!(
            "{shown} is an image ({media_type}) of {size} bytes; images over {MAX_IMAGE_BYTES} \
             bytes cannot be shown"
        )
    };
    if size > MAX_IMAGE_BYTES as u64 {
        return Err(too_large(size));
    }
    let mut bytes = head;
    // One byte past the cap tells a file that grew meanwhile.
    let room = (MAX_IMAGE_BYTES + 1).saturating_sub(bytes.len()) as u64;
    file.take(room)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read {shown}: {err}"))?;
    let source = sniffed_image_source(media_type, &bytes).map_err(|err| match err {
        ImageError::TooLarge { bytes } => too_large(bytes as u64),
        other => format!("{shown}: {other}"),
    })?;
    Ok(ToolResult {
        content: format!("{shown}: an image ({media_type}), {} bytes", bytes.len()),
        is_error: false,
        images: vec![source],
    })
}

/// Read one line (including its `\n`) into `line`, keeping at most
/// `MAX_LINE_BYTES` bytes of it so a huge single-line file cannot exhaust
/// memory. Returns false at end of file.
fn read_line_capped(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<bool> {
    line.clear();
    let mut saw_any = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(saw_any);
        }
        saw_any = true;
        let newline = buffer.iter().position(|byte| *byte == b'\n');
        let take = newline.map_or(buffer.len(), |index| index + 1);
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&buffer[..take.min(room)]);
        reader.consume(take);
        if newline.is_some() {
            return Ok(true);
        }
    }
}

fn describe_open_error(shown: &str, err: &ConfinedError) -> String {
    match err {
        err if is_not_found(err) => format!("file does not exist: {shown}"),
        err if is_directory(err) => {
            format!("{shown} is a directory, not a file; use LS to list it")
        }
        ConfinedError::Kind { found, .. } => {
            format!("{shown} is {found}, not a regular file; Read only reads regular files")
        }
        err => describe(err, "read", shown),
    }
}

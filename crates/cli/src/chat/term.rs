//! The terminal: lines typed at the prompt (reedline: editing, history),
//! keys pressed while a turn runs (crossterm raw mode), and output scrolled
//! above the prompt. Line-oriented on purpose, so it works in tmux and any
//! plain pty.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal;
use reedline::{
    EditCommand, FileBackedHistory, Prompt, PromptEditMode, PromptHistorySearch, Reedline, Signal,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the person did at the prompt.
pub enum Input {
    Line(String),
    CtrlC,
    /// Ctrl-D, or the terminal went away.
    End,
}

/// A key that matters while a turn runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Esc or Ctrl-C: interrupt.
    Interrupt,
    Char(char),
    Enter,
    Backspace,
}

pub struct Terminal {
    editor: Reedline,
    /// Whether the last byte written ended a line.
    at_line_start: bool,
    /// Raw mode (while a turn runs): `\n` alone does not return the cursor.
    raw: bool,
}

struct LinePrompt(String);

impl Prompt for LinePrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.0)
    }
    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn render_prompt_indicator(&self, _: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("… ")
    }
    fn render_prompt_history_search_indicator(&self, _: PromptHistorySearch) -> Cow<'_, str> {
        Cow::Borrowed("(search) ")
    }
}

impl Terminal {
    /// The editor, with its history in `history` when given.
    pub fn new(history: Option<PathBuf>) -> Self {
        let mut editor = Reedline::create();
        if let Some(path) = history
            && let Ok(history) = FileBackedHistory::with_file(1000, path)
        {
            editor = editor.with_history(Box::new(history));
        }
        Self {
            editor,
            at_line_start: true,
            raw: false,
        }
    }

    /// Read a line after `prompt`. Blocks this worker only (the embedded
    /// server keeps serving on the others).
    pub fn read(&mut self, prompt: &str) -> Input {
        self.end_line();
        let was_raw = self.raw;
        self.set_raw(false);
        let prompt = LinePrompt(prompt.to_string());
        let signal = tokio::task::block_in_place(|| self.editor.read_line(&prompt));
        self.at_line_start = true;
        self.set_raw(was_raw);
        match signal {
            Ok(Signal::Success(line)) => Input::Line(line),
            Ok(Signal::CtrlC) => Input::CtrlC,
            Ok(Signal::ExternalBreak(line)) => Input::Line(line),
            Ok(_) | Err(_) => Input::End,
        }
    }

    /// Start the next line read with `text` in the editor (keys typed
    /// ahead while a turn ran).
    pub fn prefill(&mut self, text: &str) {
        if !text.is_empty() {
            self.editor
                .run_edit_commands(&[EditCommand::InsertString(text.to_string())]);
        }
    }

    /// Take back the last character echoed on this line.
    pub fn backspace(&mut self) {
        self.text("\x08 \x08");
    }

    /// Raw mode on or off: on while a turn runs, so Esc reaches us at once.
    pub fn set_raw(&mut self, raw: bool) {
        if raw == self.raw {
            return;
        }
        let _ = if raw {
            terminal::enable_raw_mode()
        } else {
            terminal::disable_raw_mode()
        };
        self.raw = raw;
    }

    /// Text as it streams (no newline added).
    pub fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let shown = if self.raw {
            Cow::Owned(text.replace('\n', "\r\n"))
        } else {
            Cow::Borrowed(text)
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(shown.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    /// A whole line of its own.
    pub fn line(&mut self, line: impl std::fmt::Display) {
        self.end_line();
        self.text(&format!("{line}\n"));
    }

    /// End a line left open by streamed text.
    pub fn end_line(&mut self) {
        if !self.at_line_start {
            self.text("\n");
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.set_raw(false);
    }
}

/// Keys pressed while a turn runs, read by one blocking task while it is
/// not paused.
pub struct KeyWatch {
    running: Arc<AtomicBool>,
    task: Option<JoinHandle<()>>,
    sender: mpsc::UnboundedSender<Key>,
    pub keys: mpsc::UnboundedReceiver<Key>,
}

impl KeyWatch {
    /// Start reading keys; the terminal must be in raw mode.
    pub fn start() -> Self {
        let (sender, keys) = mpsc::unbounded_channel();
        let mut watch = Self {
            running: Arc::new(AtomicBool::new(false)),
            task: None,
            sender,
            keys,
        };
        watch.resume();
        watch
    }

    /// Read keys again after [`KeyWatch::pause`].
    pub fn resume(&mut self) {
        if self.task.is_some() {
            return;
        }
        let running = Arc::new(AtomicBool::new(true));
        self.running = running.clone();
        let sender = self.sender.clone();
        self.task = Some(tokio::task::spawn_blocking(move || {
            // Polled, so that a pause is seen within a tick and the editor
            // gets every key after it.
            while running.load(Ordering::Relaxed) {
                match event::poll(Duration::from_millis(30)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => break,
                }
                let Ok(Event::Key(key)) = event::read() else {
                    continue;
                };
                if let Some(key) = meaning(key)
                    && sender.send(key).is_err()
                {
                    break;
                }
            }
        }));
    }

    /// Stop reading keys (so the line editor can).
    pub async fn pause(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

fn meaning(key: KeyEvent) -> Option<Key> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    match key.code {
        KeyCode::Esc => Some(Key::Interrupt),
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Some(Key::Interrupt),
        // Other control keys are no text to keep.
        KeyCode::Char(_)
            if key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            None
        }
        KeyCode::Char(c) => Some(Key::Char(c)),
        KeyCode::Enter => Some(Key::Enter),
        KeyCode::Backspace => Some(Key::Backspace),
        _ => None,
    }
}

//! `agentd chat` in a real terminal: a tmux server of its own per test (its
//! socket in a temporary directory), keys sent with `send-keys`, and the
//! screen read with `capture-pane`. Every wait has a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

/// What the terminal shows after the program exits, then its status and `]`.
const EXITED: &str = "[program exited: ";

/// Each wait for the screen is bounded by this.
pub const SCREEN_WAIT: Duration = Duration::from_secs(30);

pub struct Screen {
    dir: TempDir,
}

impl Screen {
    /// Run `command` (program, arguments, environment and directory) in a
    /// new 120×40 terminal. The terminal stays after the program exits, so
    /// its last words can be read.
    pub fn start(command: &Command) -> Self {
        let dir = TempDir::new().unwrap();
        let conf = dir.path().join("tmux.conf");
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g history-limit 5000\n",
        )
        .unwrap();
        let screen = Screen { dir };
        // tmux drops what a program wrote just before it exited when it
        // notices the exit first (seen 2 in 200 on an idle machine), so the
        // program runs under a shell that outlives it and marks its end
        // after its last output. The trap keeps Ctrl-C from ending the
        // shell; a caught signal is reset to default in the program.
        let mut argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            format!("trap : INT; \"$@\"; printf '\\n{EXITED}%s]\\n' \"$?\"; exec sleep 3600"),
            "sh".into(),
            "env".into(),
            "-i".into(),
            "TERM=screen".into(),
        ];
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                argv.push(format!(
                    "{}={}",
                    key.to_string_lossy(),
                    value.to_string_lossy()
                ));
            }
        }
        argv.push(command.get_program().to_string_lossy().into_owned());
        argv.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
        let cwd = command.get_current_dir().unwrap_or(Path::new("/"));
        let mut tmux = screen.tmux();
        tmux.arg("-f")
            .arg(&conf)
            .args(["new-session", "-d", "-x", "120", "-y", "40", "-c"]);
        tmux.arg(cwd).arg("--").args(&argv);
        let status = tmux
            .status()
            .expect("tmux must be installed (scripts/install-deps.sh)");
        assert!(status.success(), "tmux new-session failed");
        screen
    }

    fn tmux(&self) -> Command {
        let mut tmux = Command::new("tmux");
        tmux.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .arg("-S")
            .arg(self.dir.path().join("tmux.sock"));
        tmux
    }

    /// Press keys by tmux's names (`Enter`, `Escape`, `C-c`, `y`).
    pub fn keys(&self, keys: &[&str]) {
        let status = self.tmux().arg("send-keys").args(keys).status().unwrap();
        assert!(status.success());
    }

    /// At the empty prompt, type `text` and Enter.
    pub async fn say(&self, text: &str) {
        self.wait_prompt().await;
        self.type_line(text);
    }

    /// Type `text` literally, then Enter.
    pub fn type_line(&self, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
        self.keys(&["Enter"]);
    }

    /// Everything on the screen and scrolled above it, wrapped lines joined.
    pub fn text(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-J", "-S", "-"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until the screen shows `needle`; the screen then.
    pub async fn wait_for(&self, needle: &str) -> String {
        self.wait_until(&format!("{needle:?} on screen"), |text| {
            text.contains(needle)
        })
        .await
    }

    /// Wait until the chat's prompt is back and empty (typing before it is
    /// would go to the running turn's key watch).
    pub async fn wait_prompt(&self) -> String {
        self.wait_until("an empty prompt", |text| {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::trim)
                == Some("›")
        })
        .await
    }

    pub async fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + SCREEN_WAIT;
        loop {
            let text = self.text();
            if done(&text) {
                return text;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "waited {SCREEN_WAIT:?} for {what}; the screen:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the program in the terminal has exited.
    pub fn exited(&self) -> bool {
        self.text().contains(EXITED)
    }

    /// Wait for the program to exit.
    pub async fn wait_exit(&self) -> String {
        // The mark comes after the program's last output: all it wrote is
        // on the screen with it.
        self.wait_until("the program to exit", |text| text.contains(EXITED))
            .await
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

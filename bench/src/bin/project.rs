//! What reading a workspace's project files costs a turn: `project::load` on
//! an empty workspace and on one with the files a Claude Code repository
//! has (CLAUDE.md with imports, AGENTS.md, .claude/ settings, commands,
//! agents and skills, .mcp.json), as the server reads them each turn.
//!
//!     cargo build --release -p agentd-bench
//!     target/release/project [N]

use std::path::Path;
use std::time::Instant;

use agentd_bench::{micros, quantile};
use agentd_sandbox::confined::Root;
use agentd_server::project::{ProjectFiles, ProjectScope, load};

fn write(root: &Path, rel: &str, text: &str) -> anyhow::Result<()> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

fn repository(root: &Path) -> anyhow::Result<()> {
    let rules = "- Use the project's error type.\n".repeat(60);
    write(
        root,
        "CLAUDE.md",
        &format!("# Rules\n{rules}\nSee @docs/style.md and @docs/testing.md\n"),
    )?;
    write(root, "docs/style.md", &rules)?;
    write(root, "docs/testing.md", &rules)?;
    write(root, "AGENTS.md", &rules)?;
    write(
        root,
        ".claude/settings.json",
        r#"{"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"], "allow": ["Bash(cargo *)"]},
            "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "cargo fmt"}]}]}}"#,
    )?;
    write(
        root,
        ".mcp.json",
        r#"{"mcpServers": {"docs": {"command": "docs-server"}}}"#,
    )?;
    for name in ["review", "fix", "release"] {
        write(
            root,
            &format!(".claude/commands/{name}.md"),
            "Do $ARGUMENTS carefully.\n",
        )?;
    }
    write(
        root,
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews\n---\nReview.\n",
    )?;
    write(
        root,
        ".claude/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploys\n---\nSteps.\n",
    )?;
    Ok(())
}

fn measure(label: &str, root: &Path, iterations: usize) -> anyhow::Result<()> {
    let scope = ProjectScope {
        read: true,
        trusted: true,
        sandboxed: true,
        template_files: vec!["app_spec.txt".into()],
        ..ProjectScope::default()
    };
    let files = ProjectFiles::new(Root::open(root)?, None);
    let mut samples = Vec::with_capacity(iterations);
    let mut size = 0;
    for _ in 0..iterations {
        let started = Instant::now();
        let project = load(&files, &scope);
        samples.push(started.elapsed());
        size = project.instructions.map_or(0, |text| text.len());
    }
    println!(
        "{label}: median {}, p99 {} per turn ({size} bytes of instructions)",
        micros(quantile(&mut samples, 0.5)),
        micros(quantile(&mut samples, 0.99)),
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let iterations: usize = std::env::args().nth(1).map_or(Ok(1000), |n| n.parse())?;
    let empty = tempfile::tempdir()?;
    measure("empty workspace", empty.path(), iterations)?;
    let full = tempfile::tempdir()?;
    repository(full.path())?;
    measure("Claude Code repository", full.path(), iterations)?;
    Ok(())
}

//! Every file tool refuses paths outside the workspace and changes nothing there;
//! every tool turns bad input into an error naming the problem.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use serde_json::{Value, json};
use support::{SECRET, Workspace};

/// Tool inputs that use `path` as their path; each touches the secret if allowed.
fn inputs_for(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("Read", json!({"file_path": path})),
        ("Write", json!({"file_path": path, "content": "pwned"})),
        (
            "Edit",
            json!({"file_path": path, "old_string": SECRET, "new_string": "pwned"}),
        ),
        (
            "Edit",
            json!({"file_path": path, "old_string": "", "new_string": "pwned"}),
        ),
        (
            "MultiEdit",
            json!({"file_path": path, "edits": [{"old_string": SECRET, "new_string": "pwned"}]}),
        ),
        ("Glob", json!({"pattern": "*", "path": path})),
        ("Glob", json!({"pattern": format!("{path}/*")})),
        (
            "Grep",
            json!({"pattern": "TOPSECRET", "path": path, "output_mode": "content"}),
        ),
        ("LS", json!({"path": path})),
    ]
}

/// Everything under `dir`, with contents, to prove nothing changed.
fn snapshot(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut entries: Vec<_> = walk(dir)
        .into_iter()
        .map(|path| {
            let content = std::fs::read(&path).unwrap_or_default();
            (path, content)
        })
        .collect();
    entries.sort();
    entries
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[tokio::test]
async fn file_tools_refuse_paths_outside_the_workspace() {
    let w = Workspace::new();
    symlink(w.outside.join("secret.txt"), w.ws.join("link-out")).unwrap();
    symlink(&w.outside, w.ws.join("dir-out")).unwrap();
    symlink(w.outside.join("not-yet.txt"), w.ws.join("dangling-out")).unwrap();
    let escapes = [
        "../x".to_string(),
        "../outside/secret.txt".to_string(),
        "/etc/passwd".to_string(),
        "~/.ssh/id_rsa".to_string(),
        "link-out".to_string(),
        "dir-out".to_string(),
        "dir-out/secret.txt".to_string(),
        "dir-out/new.txt".to_string(),
        "dangling-out".to_string(),
        w.outside.join("secret.txt").display().to_string(),
    ];
    let home_key = std::env::var("HOME")
        .map(|home| PathBuf::from(home).join(".ssh/id_rsa"))
        .unwrap();
    let home_key_before = std::fs::read(&home_key).ok();
    let passwd_before = std::fs::read("/etc/passwd").unwrap();
    let outside_before = snapshot(&w.outside);

    for escape in &escapes {
        // Interlock: never hand a mutating tool a path the guard would accept.
        assert!(
            w.ctx.guard.resolve(escape).is_err(),
            "the guard accepts {escape:?}"
        );
        for (tool, input) in inputs_for(escape) {
            let result = w.call(tool, input.clone()).await;
            assert!(
                result.is_error,
                "{tool} {input} was not refused: {}",
                result.content
            );
            assert!(
                result.content.contains("outside the workspace"),
                "{tool} {input}: unexpected message {}",
                result.content
            );
            assert!(
                !result.content.contains(SECRET),
                "{tool} {input} leaked the secret"
            );
        }
    }

    assert_eq!(
        snapshot(&w.outside),
        outside_before,
        "something outside the workspace changed"
    );
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd_before);
    assert_eq!(std::fs::read(&home_key).ok(), home_key_before);
    assert!(!w.outside.join("not-yet.txt").exists());
}

#[tokio::test]
async fn tools_explain_bad_input() {
    let w = Workspace::new();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("Bash", json!("{\"command\": \"ls"), "not valid JSON"),
        ("Bash", json!({}), "missing required field `command`"),
        (
            "Bash",
            json!({"command": 5}),
            "field `command` must be a string",
        ),
        (
            "Bash",
            json!({"command": "ls", "sudo": true}),
            "unknown field `sudo`",
        ),
        ("Read", json!("garbage"), "expected a JSON object"),
        (
            "Read",
            json!({"file_path": "a", "offset": "10"}),
            "field `offset` must be an integer",
        ),
        (
            "Read",
            json!({"file_path": "a", "limit": 0}),
            "field `limit` must be at least 1",
        ),
        ("Read", json!({"path": "a"}), "unknown field `path`"),
        (
            "Write",
            json!({"file_path": "a"}),
            "missing required field `content`",
        ),
        ("Write", json!([1, 2]), "got an array"),
        (
            "Edit",
            json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
            "field `replace_all` must be a boolean",
        ),
        (
            "MultiEdit",
            json!({"file_path": "a", "edits": {"old_string": "x"}}),
            "field `edits` must be an array",
        ),
        (
            "MultiEdit",
            json!({"file_path": "a", "edits": [{"old_string": "x"}]}),
            "missing required field `edits[0].new_string`",
        ),
        (
            "Glob",
            json!({"path": "."}),
            "missing required field `pattern`",
        ),
        (
            "Grep",
            json!({"pattern": "x", "-A": -1}),
            "field `-A` must be at least 0",
        ),
        (
            "Grep",
            json!({"pattern": "x", "-i": "true"}),
            "field `-i` must be a boolean",
        ),
        (
            "LS",
            json!({"path": ".", "ignore": "*.log"}),
            "field `ignore` must be an array",
        ),
        (
            "LS",
            json!({"path": ".", "ignore": [1]}),
            "field `ignore[0]` must be a string",
        ),
        ("Read", json!({"file_path": ""}), "the path is empty"),
    ];
    for (tool, input, needle) in cases {
        let result = w.call(tool, input.clone()).await;
        assert!(result.is_error, "{tool} {input} should fail");
        assert!(
            result.content.contains(needle),
            "{tool} {input}: {:?} lacks {needle:?}",
            result.content
        );
    }
    let optional_nulls = json!({"file_path": "a.txt", "offset": null, "limit": null});
    w.file("a.txt", "ok\n");
    assert!(!w.call("Read", optional_nulls).await.is_error);
}

#[test]
fn builtins_have_claude_code_names_schemas_and_flags() {
    let registry = agentd_tools::builtin_tools();
    let names: Vec<&str> = registry.iter().map(|tool| tool.name()).collect();
    assert_eq!(
        names,
        [
            "Bash",
            "BashOutput",
            "Edit",
            "Glob",
            "Grep",
            "KillShell",
            "LS",
            "MultiEdit",
            "Read",
            "WebFetch",
            "Write"
        ]
    );
    let read_only: Vec<&str> = registry
        .iter()
        .filter(|tool| tool.is_read_only())
        .map(|tool| tool.name())
        .collect();
    assert_eq!(
        read_only,
        ["BashOutput", "Glob", "Grep", "LS", "Read", "WebFetch"]
    );
    let expected_fields: &[(&str, &[&str])] = &[
        (
            "Bash",
            &["command", "description", "run_in_background", "timeout"],
        ),
        ("BashOutput", &["bash_id", "filter"]),
        ("KillShell", &["shell_id"]),
        ("Read", &["file_path", "limit", "offset"]),
        ("WebFetch", &["prompt", "url"]),
        ("Write", &["content", "file_path"]),
        (
            "Edit",
            &["file_path", "new_string", "old_string", "replace_all"],
        ),
        ("MultiEdit", &["edits", "file_path"]),
        ("Glob", &["path", "pattern"]),
        (
            "Grep",
            &[
                "-A",
                "-B",
                "-C",
                "-i",
                "-n",
                "glob",
                "head_limit",
                "multiline",
                "output_mode",
                "path",
                "pattern",
                "type",
            ],
        ),
        ("LS", &["ignore", "path"]),
    ];
    for (name, fields) in expected_fields {
        let schema = registry.get(name).unwrap().input_schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        let mut keys: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(&keys, fields, "{name}");
        for required in schema["required"].as_array().unwrap() {
            assert!(
                keys.contains(&required.as_str().unwrap()),
                "{name}: {required}"
            );
        }
        assert!(!registry.get(name).unwrap().description().is_empty());
    }
}

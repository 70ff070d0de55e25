//! Skill discovery and the `Skill` tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use agentd_tools::skills::{MAX_SKILL_FILE_BYTES, Skill, SkillSet, SkillSource, is_valid_name};
use agentd_tools::{SkillTool, Tool, ToolContext};
use serde_json::json;

struct Dirs {
    _root: tempfile::TempDir,
    root: PathBuf,
    global: PathBuf,
    user: PathBuf,
    ws: PathBuf,
}

impl Dirs {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let dirs = Self {
            global: base.join("global"),
            user: base.join("user"),
            ws: base.join("ws"),
            root: base,
            _root: root,
        };
        for dir in [&dirs.global, &dirs.user, &dirs.ws] {
            fs::create_dir_all(dir).unwrap();
        }
        dirs
    }

    fn discover(&self) -> (SkillSet, Vec<String>) {
        SkillSet::discover(Some(&self.global), Some(&self.user))
    }
}

/// Write `dir/folder/SKILL.md` (plus parents) and return the folder.
fn skill_file(dir: &Path, folder: &str, content: &str) -> PathBuf {
    let folder = dir.join(folder);
    fs::create_dir_all(&folder).unwrap();
    fs::write(folder.join("SKILL.md"), content).unwrap();
    folder
}

fn skill(dir: &Path, name: &str, description: &str) -> PathBuf {
    skill_file(
        dir,
        name,
        &format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo it well.\n"),
    )
}

fn only_warning(warnings: &[String], needle: &str) -> String {
    let matching: Vec<&String> = warnings.iter().filter(|w| w.contains(needle)).collect();
    assert_eq!(matching.len(), 1, "{needle:?} in {warnings:#?}");
    matching[0].clone()
}

#[test]
fn discovers_global_skills_sorted_with_their_fields() {
    let d = Dirs::new();
    skill(&d.global, "zeta", "Last one.");
    skill_file(
        &d.global,
        "pdf",
        "---\nname: pdf\ndescription: >\n  Fill PDF forms.\n  Use for PDFs.\nallowed-tools: Read, Bash(python3 *)\nlicense: MIT\n---\nbody\n",
    );
    fs::write(d.global.join("README.md"), "not a skill").unwrap();
    let (set, warnings) = SkillSet::discover(Some(&d.global), None);
    assert!(warnings.is_empty(), "{warnings:?}");
    let names: Vec<&str> = set.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pdf", "zeta"]);
    let pdf = set.get("pdf").unwrap();
    assert_eq!(pdf.description, "Fill PDF forms. Use for PDFs.");
    assert_eq!(pdf.allowed_tools, ["Read", "Bash(python3 *)"]);
    assert_eq!(pdf.source, SkillSource::Global);
    assert_eq!(pdf.dir, d.global.join("pdf"));
    assert_eq!(pdf.skill_file(), d.global.join("pdf/SKILL.md"));
    assert_eq!(set.len(), 2);
    assert_eq!(set.dirs(), [d.global.join("pdf"), d.global.join("zeta")]);
}

#[test]
fn folder_name_is_the_fallback_name() {
    let d = Dirs::new();
    skill_file(
        &d.global,
        "from-folder",
        "---\ndescription: Uses its folder name.\n---\nx",
    );
    let (set, warnings) = d.discover();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(set.get("from-folder").is_some());
}

#[test]
fn a_user_skill_overrides_the_global_one_of_the_same_name() {
    let d = Dirs::new();
    skill(&d.global, "review", "Global review.");
    skill(&d.global, "lint", "Global lint.");
    skill(&d.user, "review", "My review.");
    let (set, warnings) = d.discover();
    assert!(warnings.is_empty(), "{warnings:?}");
    let review = set.get("review").unwrap();
    assert_eq!(review.description, "My review.");
    assert_eq!(review.source, SkillSource::User);
    assert_eq!(review.dir, d.user.join("review"));
    assert_eq!(set.get("lint").unwrap().source, SkillSource::Global);
}

#[test]
fn invalid_skills_are_skipped_with_a_warning_each() {
    let d = Dirs::new();
    skill(&d.global, "good", "Fine.");
    skill_file(
        &d.global,
        "bad-name",
        "---\nname: Bad_Name\ndescription: x\n---\n",
    );
    skill_file(
        &d.global,
        "Upper",
        "---\ndescription: folder name is invalid\n---\n",
    );
    skill_file(&d.global, "no-desc", "---\nname: no-desc\n---\nbody");
    skill_file(
        &d.global,
        "blank-desc",
        "---\ndescription: \"  \"\n---\nbody",
    );
    skill_file(&d.global, "no-front", "# Just markdown\n");
    skill_file(&d.global, "unclosed", "---\ndescription: x\n");
    skill_file(
        &d.global,
        "garbled",
        "---\ndescription: x\nnot yaml at all\n---\n",
    );
    let long = "x".repeat(1025);
    skill_file(
        &d.global,
        "too-long",
        &format!("---\ndescription: {long}\n---\n"),
    );
    fs::create_dir_all(d.global.join("empty-folder")).unwrap();
    let big = d.global.join("huge");
    skill(&d.global, "huge", "Big.");
    let padding = "y".repeat(MAX_SKILL_FILE_BYTES as usize);
    fs::write(
        big.join("SKILL.md"),
        format!("---\ndescription: Big.\n---\n{padding}"),
    )
    .unwrap();

    let (set, warnings) = d.discover();
    let names: Vec<&str> = set.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"], "{warnings:#?}");
    assert_eq!(warnings.len(), 10, "{warnings:#?}");
    assert!(only_warning(&warnings, "bad-name").contains("\"Bad_Name\" is invalid"));
    assert!(only_warning(&warnings, "Upper").contains("\"Upper\" is invalid"));
    assert!(only_warning(&warnings, "/no-desc").contains("no `description`"));
    assert!(only_warning(&warnings, "blank-desc").contains("no `description`"));
    assert!(only_warning(&warnings, "no-front").contains("does not start with YAML front matter"));
    assert!(only_warning(&warnings, "unclosed").contains("no closing `---`"));
    assert!(only_warning(&warnings, "garbled").contains("not `key: value`"));
    assert!(only_warning(&warnings, "too-long").contains("1025 characters"));
    assert!(only_warning(&warnings, "empty-folder").contains("has no SKILL.md"));
    assert!(only_warning(&warnings, "huge").contains("larger than 256 KiB"));
    assert!(
        warnings.iter().all(|w| w.contains("skipped")),
        "{warnings:#?}"
    );
}

#[test]
fn two_folders_claiming_one_name_keep_the_first() {
    let d = Dirs::new();
    skill_file(&d.global, "a", "---\nname: same\ndescription: first\n---\n");
    skill_file(
        &d.global,
        "b",
        "---\nname: same\ndescription: second\n---\n",
    );
    let (set, warnings) = d.discover();
    assert_eq!(set.get("same").unwrap().description, "first");
    assert!(only_warning(&warnings, "/b").contains("already used"));
}

#[test]
fn missing_directories_are_fine() {
    let d = Dirs::new();
    let missing = d.root.join("does-not-exist");
    let (set, warnings) = SkillSet::discover(Some(&missing), Some(&missing));
    assert!(set.is_empty() && warnings.is_empty(), "{warnings:?}");
    let (set, warnings) = SkillSet::discover(None, None);
    assert!(set.is_empty() && warnings.is_empty());
    assert_eq!(set.prompt_section(), None);

    let file = d.root.join("a-file");
    fs::write(&file, "x").unwrap();
    let (set, warnings) = SkillSet::discover(Some(&file), None);
    assert!(set.is_empty());
    assert!(warnings[0].contains("not a directory"), "{warnings:?}");
}

#[test]
fn symlinks_escaping_the_directory_are_skipped() {
    let d = Dirs::new();
    let outside = d.root.join("outside");
    skill(&outside, "escaper", "Lives outside.");
    skill(&d.global, "real", "Lives inside.");
    std::os::unix::fs::symlink(outside.join("escaper"), d.global.join("escaper")).unwrap();
    std::os::unix::fs::symlink(&d.global, d.global.join("loop")).unwrap();
    // A link to a folder inside the directory is fine.
    std::os::unix::fs::symlink(d.global.join("real"), d.global.join("alias")).unwrap();
    // SKILL.md itself linking out of its folder is refused too.
    let linked = d.global.join("linked-file");
    fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(outside.join("escaper/SKILL.md"), linked.join("SKILL.md")).unwrap();

    let (set, warnings) = d.discover();
    assert!(set.get("escaper").is_none());
    assert_eq!(set.get("real").unwrap().dir, d.global.join("real"));
    assert!(only_warning(&warnings, "global/escaper").contains("outside the skills directory"));
    assert!(only_warning(&warnings, "global/loop").contains("the skills directory itself"));
    assert!(only_warning(&warnings, "linked-file").contains("outside the skill's folder"));
    // The alias sorts first, so the real folder is the one reported.
    assert!(only_warning(&warnings, "global/real").contains("already loaded, through a link"));
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
}

#[test]
fn prompt_section_lists_each_skill_on_one_line() {
    let d = Dirs::new();
    skill(&d.global, "b-skill", "Second.");
    skill_file(
        &d.user,
        "a-skill",
        "---\ndescription: |\n  First,\n  on two lines.\n---\n",
    );
    let (set, _) = d.discover();
    assert_eq!(
        set.prompt_section().unwrap(),
        "- a-skill: First, on two lines.\n- b-skill: Second."
    );
}

#[test]
fn names_follow_claude_codes_rule() {
    for good in ["a", "pdf", "my-skill-2", "0day", &"a".repeat(64)] {
        assert!(is_valid_name(good), "{good}");
    }
    for bad in ["", "-a", "A", "a_b", "a b", "ä", &"a".repeat(65)] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}

fn tool_for(d: &Dirs) -> (SkillTool, ToolContext) {
    let (set, warnings) = d.discover();
    assert!(warnings.is_empty(), "{warnings:?}");
    (
        SkillTool::new(set),
        ToolContext::for_workspace(&d.ws).unwrap(),
    )
}

#[tokio::test]
async fn skill_tool_returns_the_body_with_the_folder_and_its_files() {
    let d = Dirs::new();
    let folder = skill_file(
        &d.global,
        "pdf",
        "---\nname: pdf\ndescription: PDFs.\n---\n\n# PDF\n\nRun scripts/fill.py.\n",
    );
    fs::create_dir_all(folder.join("scripts/lib")).unwrap();
    fs::write(folder.join("reference.md"), "ref").unwrap();
    fs::write(folder.join("scripts/fill.py"), "print()").unwrap();
    fs::write(folder.join("scripts/lib/util.py"), "").unwrap();
    fs::write(folder.join(".hidden"), "").unwrap();
    let (tool, ctx) = tool_for(&d);

    assert_eq!(tool.name(), "Skill");
    assert!(tool.is_read_only());
    assert!(tool.description().contains("Available skills: pdf."));
    let result = tool.call(json!({"skill": "pdf"}), &ctx).await;
    assert!(!result.is_error, "{}", result.content);
    let expected = format!(
        "Base directory for this skill: {}\n\
         Other files in the folder (relative to it; read them as needed):\n\
         - reference.md\n- scripts/fill.py\n- scripts/lib/util.py\n\n\
         # PDF\n\nRun scripts/fill.py.",
        folder.display()
    );
    assert_eq!(result.content, expected);
    let slash = tool.call(json!({"skill": "/pdf"}), &ctx).await;
    assert_eq!(slash.content, expected);
}

#[tokio::test]
async fn skill_tool_caps_the_file_listing() {
    let d = Dirs::new();
    let folder = skill(&d.global, "many", "Many files.");
    for n in 0..60 {
        fs::write(folder.join(format!("f{n:02}.txt")), "").unwrap();
    }
    let (tool, ctx) = tool_for(&d);
    let result = tool.call(json!({"skill": "many"}), &ctx).await;
    assert!(
        result.content.contains("- f49.txt\n- … and 10 more\n"),
        "{}",
        result.content
    );
    assert!(!result.content.contains("f50.txt"));
}

#[tokio::test]
async fn skill_tool_says_when_the_folder_has_nothing_else() {
    let d = Dirs::new();
    skill(&d.global, "solo", "Alone.");
    let (tool, ctx) = tool_for(&d);
    let result = tool.call(json!({"skill": "solo"}), &ctx).await;
    assert!(
        result
            .content
            .contains("\nThe folder has no other files.\n\n# solo"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn unknown_skills_and_bad_input_are_errors() {
    let d = Dirs::new();
    skill(&d.global, "alpha", "A.");
    skill(&d.global, "beta", "B.");
    let (tool, ctx) = tool_for(&d);
    let result = tool.call(json!({"skill": "gamma"}), &ctx).await;
    assert!(result.is_error);
    assert_eq!(
        result.content,
        "unknown skill \"gamma\"; available skills: alpha, beta"
    );
    let result = tool.call(json!({"name": "alpha"}), &ctx).await;
    assert!(
        result.is_error && result.content.contains("unknown field `name`"),
        "{}",
        result.content
    );

    let empty = SkillTool::new(SkillSet::default());
    let result = empty.call(json!({"skill": "alpha"}), &ctx).await;
    assert!(
        result.content.ends_with("available skills: none"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn skill_tool_reads_supporting_files_only_inside_the_folder() {
    let d = Dirs::new();
    let folder = skill(&d.global, "docs", "Docs.");
    fs::write(folder.join("guide.md"), "guide text").unwrap();
    fs::write(d.root.join("outside.txt"), "OUTSIDE-SECRET").unwrap();
    std::os::unix::fs::symlink(d.root.join("outside.txt"), folder.join("out-link")).unwrap();
    std::os::unix::fs::symlink("guide.md", folder.join("in-link")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        folder.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let (tool, ctx) = tool_for(&d);
    let read = |file: String| {
        let call = tool.call(json!({"skill": "docs", "file": file}), &ctx);
        async {
            tokio::time::timeout(std::time::Duration::from_secs(2), call)
                .await
                .unwrap()
        }
    };
    for file in ["guide.md", "in-link"] {
        let result = read(file.into()).await;
        assert_eq!(
            (result.is_error, result.content.as_str()),
            (false, "guide text")
        );
    }
    let outside = d.root.join("outside.txt").display().to_string();
    let refusals = [
        ("out-link".to_string(), "outside the skill's folder"),
        (
            "../../outside.txt".to_string(),
            "outside the skill's folder",
        ),
        (outside, "outside the skill's folder"),
        (
            "pipe".to_string(),
            "a FIFO (named pipe), not a regular file",
        ),
        ("missing.md".to_string(), "No such file"),
    ];
    for (file, needle) in refusals {
        let result = read(file.clone()).await;
        assert!(
            result.is_error && result.content.contains(needle),
            "{file}: {}",
            result.content
        );
        assert!(!result.content.contains("OUTSIDE-SECRET"));
    }
}

#[tokio::test]
async fn a_skill_file_gone_since_discovery_is_an_error() {
    let d = Dirs::new();
    let folder = skill(&d.global, "fleeting", "Here, then gone.");
    let (tool, ctx) = tool_for(&d);
    fs::remove_file(folder.join("SKILL.md")).unwrap();
    let result = tool.call(json!({"skill": "fleeting"}), &ctx).await;
    assert!(result.is_error);
    assert!(
        result
            .content
            .contains("cannot be loaded: the folder has no SKILL.md"),
        "{}",
        result.content
    );
}

#[test]
fn sets_can_be_built_from_skills() {
    let skill = Skill {
        name: "x".into(),
        description: "d".into(),
        dir: PathBuf::from("/skills/x"),
        allowed_tools: Vec::new(),
        source: SkillSource::User,
    };
    let set = SkillSet::new([skill.clone()]);
    assert_eq!(set.get("x"), Some(&skill));
    assert_eq!(set.prompt_section().as_deref(), Some("- x: d"));
}

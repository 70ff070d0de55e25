//! The config's mounts, resolved once when the runtime is made: each host to
//! its canonical path, each `{user}` template to its canonical base, each
//! mountable root to its canonical path, and the places no mount host may
//! hold or lie in. Turns and session creations work from this table and
//! never resolve a configured path again: a link swapped in later is
//! refused when the host is opened (`super::host`), not followed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{Config, MountMode, MountSpec, SandboxMode};

/// The placeholder for the session owner's name in a configured host.
pub(crate) const USER: &str = "{user}";

/// A configured mount's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigHost {
    /// A canonical directory.
    Fixed(PathBuf),
    /// Per-user directories: the canonical `base` (the part before the
    /// first `{user}` component) and the components below it.
    PerUser { base: PathBuf, below: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigMount {
    pub(crate) host: ConfigHost,
    pub(crate) path: PathBuf,
    pub(crate) read_only: bool,
}

/// See the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct MountTable {
    profiles: BTreeMap<String, Vec<ConfigMount>>,
    users: BTreeMap<String, Vec<ConfigMount>>,
    mountable: Vec<PathBuf>,
    user_mountable: BTreeMap<String, Vec<PathBuf>>,
    /// Places no host may hold or lie in, with what they are.
    reserved: Vec<(PathBuf, String)>,
    /// The bases of `{user}` templates.
    user_bases: Vec<PathBuf>,
}

/// One of `a` and `b` lies in (or is) the other.
pub(crate) fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl MountTable {
    /// Resolve the config's mounts; why the config cannot be served if not.
    pub(crate) fn resolve(config: &Config, data_dir: &Path) -> Result<Self, String> {
        let mut table = Self {
            reserved: reserved(config, data_dir),
            ..Self::default()
        };
        for (name, profile) in &config.profiles {
            if profile.sandbox == SandboxMode::Off && !profile.mounts.is_empty() {
                return Err(format!(
                    "profile {name:?}: mounts need the sandbox (it has sandbox = \"off\")"
                ));
            }
            let mounts = table.parse_all(&profile.mounts, &format!("profile {name:?}"))?;
            table.profiles.insert(name.clone(), mounts);
        }
        for (name, user) in &config.users {
            let mounts = table.parse_all(&user.mounts, &format!("[users.{name:?}]"))?;
            table.users.insert(name.clone(), mounts);
        }
        table.check_bases()?;
        table.check_fixed_hosts()?;
        table.mountable = table.roots(&config.mounts.allowed)?;
        for (name, user) in &config.users {
            let roots = table.roots(&user.mountable)?;
            table.user_mountable.insert(name.clone(), roots);
        }
        Ok(table)
    }

    /// The mounts every turn of a `profile` session of `owner` gets: the
    /// profile's, then the owner's.
    pub(crate) fn configured<'a>(
        &'a self,
        profile: &str,
        owner: &str,
    ) -> impl Iterator<Item = &'a ConfigMount> {
        let profile = self.profiles.get(profile).into_iter().flatten();
        profile.chain(self.users.get(owner).into_iter().flatten())
    }

    /// Why `owner`'s session may not mount the canonical `host` (as asked at
    /// creation, and again every turn: their grants are those of now).
    pub(crate) fn session_host_problem(&self, owner: &str, host: &Path) -> Option<String> {
        let own = self.user_mountable.get(owner).into_iter().flatten();
        if !self
            .mountable
            .iter()
            .chain(own)
            .any(|root| host.starts_with(root))
        {
            return Some(
                "is not inside one of your mountable roots ([mounts] allowed, \
                 [users.NAME] mountable)"
                    .into(),
            );
        }
        self.host_problem(host)
    }

    /// Why a session may not mount `host` (canonical) writable: it holds or
    /// lies in a host the configuration mounts read-only.
    pub(crate) fn writable_problem(&self, host: &Path) -> Option<String> {
        let fixed = self.profiles.values().chain(self.users.values()).flatten();
        fixed
            .filter(|mount| mount.read_only)
            .find_map(|mount| match &mount.host {
                ConfigHost::Fixed(ro) if overlaps(host, ro) => Some(format!(
                    "holds or lies in {}, which the configuration mounts read-only",
                    ro.display()
                )),
                _ => None,
            })
    }

    /// Why `host` (canonical) may be no mount's: it holds or lies in a
    /// reserved place or a `{user}` base.
    fn host_problem(&self, host: &Path) -> Option<String> {
        if let Some((_, what)) = self.reserved.iter().find(|(p, _)| overlaps(host, p)) {
            return Some(format!("holds or lies in {what}"));
        }
        let base = self.user_bases.iter().find(|base| overlaps(host, base))?;
        Some(format!(
            "holds or lies in {}, where each user's `{USER}` directories are",
            base.display()
        ))
    }

    fn parse_all(&mut self, specs: &[MountSpec], what: &str) -> Result<Vec<ConfigMount>, String> {
        specs
            .iter()
            .map(|spec| {
                let host = self
                    .parse_host(&spec.host)
                    .map_err(|err| format!("{what}: mount host {:?}: {err}", spec.host))?;
                Ok(ConfigMount {
                    host,
                    path: PathBuf::from(&spec.path),
                    read_only: spec.mode == MountMode::Ro,
                })
            })
            .collect()
    }

    /// A configured host, resolved: `{user}` only as a whole component.
    fn parse_host(&mut self, host: &str) -> Result<ConfigHost, String> {
        let names: Vec<&str> = host.strip_prefix('/').unwrap_or(host).split('/').collect();
        if !host.starts_with('/')
            || names
                .iter()
                .any(|n| n.is_empty() || *n == "." || *n == "..")
        {
            return Err("must be a plain absolute path (no `.`, `..` or doubled `/`)".into());
        }
        if names.iter().any(|n| n.contains(USER) && *n != USER) {
            return Err(format!("`{USER}` must be a whole path component"));
        }
        let Some(first) = names.iter().position(|n| *n == USER) else {
            return Ok(ConfigHost::Fixed(canonical_dir(Path::new(host))?));
        };
        let base = canonical_dir(&Path::new("/").join(names[..first].join("/")))?;
        if base == Path::new("/") {
            return Err(format!("the directory holding `{USER}` cannot be `/`"));
        }
        if !self.user_bases.contains(&base) {
            self.user_bases.push(base.clone());
        }
        let below = names[first..].iter().map(|n| n.to_string()).collect();
        Ok(ConfigHost::PerUser { base, below })
    }

    /// Bases are the same or apart: one inside another would put one
    /// user's directory in another's (`/p/{user}` and `/p/alice/{user}`).
    fn check_bases(&self) -> Result<(), String> {
        for (i, base) in self.user_bases.iter().enumerate() {
            if let Some(other) = self.user_bases[..i].iter().find(|o| overlaps(base, o)) {
                return Err(format!(
                    "the `{USER}` directories of {} and {} would lie one in the other",
                    base.display(),
                    other.display()
                ));
            }
            if let Some((_, what)) = self.reserved.iter().find(|(p, _)| overlaps(base, p)) {
                return Err(format!(
                    "{}, where `{USER}` directories are made, holds or lies in {what}",
                    base.display()
                ));
            }
        }
        Ok(())
    }

    fn check_fixed_hosts(&self) -> Result<(), String> {
        let all = self.profiles.values().chain(self.users.values()).flatten();
        for mount in all {
            let ConfigHost::Fixed(host) = &mount.host else {
                continue;
            };
            if host == Path::new("/") {
                return Err("mount host `/` cannot be mounted".into());
            }
            if let Some(problem) = self.host_problem(host) {
                return Err(format!("mount host {}: {problem}", host.display()));
            }
        }
        Ok(())
    }

    /// Mountable roots, canonical: not `/`, not in a reserved place, and
    /// apart from every `{user}` base (else a session could ask for
    /// another user's directory).
    fn roots(&self, roots: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
        roots
            .iter()
            .map(|root| {
                let shown = root.display();
                let canonical = canonical_dir(root).map_err(|e| format!("mountable root {e}"))?;
                if canonical == Path::new("/") {
                    return Err(format!("mountable root {shown} is `/`"));
                }
                if let Some((_, what)) =
                    self.reserved.iter().find(|(p, _)| canonical.starts_with(p))
                {
                    return Err(format!("mountable root {shown} lies in {what}"));
                }
                if let Some(base) = self.user_bases.iter().find(|b| overlaps(&canonical, b)) {
                    return Err(format!(
                        "mountable root {shown} holds or lies in {}, where each user's `{USER}` \
                         directories are",
                        base.display()
                    ));
                }
                Ok(canonical)
            })
            .collect()
    }
}

/// Where sessions work and agentd keeps its data: the data dir (its
/// database and workspaces), workspace roots and project directories, as
/// written and as resolved now.
fn reserved(config: &Config, data_dir: &Path) -> Vec<(PathBuf, String)> {
    let mut places = vec![(data_dir.to_path_buf(), "agentd's data dir".to_string())];
    let user_roots = config.users.values().flat_map(|u| &u.workspaces.roots);
    for root in config.workspaces.roots.iter().chain(user_roots) {
        places.push((root.clone(), format!("workspace root {}", root.display())));
    }
    for project in &config.projects {
        let what = format!("project {:?}'s directory", project.name);
        places.push((project.path.clone(), what));
    }
    let mut all = Vec::with_capacity(places.len() * 2);
    for (path, what) in places {
        let resolved = resolved_prefix(&path);
        if resolved != path {
            all.push((resolved, what.clone()));
        }
        all.push((path, what));
    }
    all
}

/// `path` with its longest existing prefix resolved (it may not exist yet).
fn resolved_prefix(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            return missing
                .iter()
                .rev()
                .fold(canonical, |acc, name| acc.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The canonical form of `path`, which must be an existing directory.
fn canonical_dir(path: &Path) -> Result<PathBuf, String> {
    let shown = path.display();
    let canonical = path
        .canonicalize()
        .map_err(|err| format!("{shown} cannot be resolved: {err}"))?;
    if !canonical.is_dir() {
        return Err(format!("{shown} is not a directory"));
    }
    Ok(canonical)
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;

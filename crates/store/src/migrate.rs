//! Each backend's migration set, embedded at build time and run by sqlx.
//! Append new files to a backend's set; applied migrations must never change
//! (sqlx checks their checksums).

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

/// `(version, description, SQL)` of each migration file, in order.
pub(crate) type MigrationSet = &'static [(i64, &'static str, &'static str)];

/// The [`MigrationSet`] of `migrations/<backend>`, from `(version, "NNNN",
/// description)` of each file `NNNN_description.sql`.
macro_rules! migration_set {
    ($backend:literal, $(($version:literal, $prefix:literal, $description:literal)),+ $(,)?) => {
        &[$((
            $version,
            $description,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"), "/migrations/", $backend, "/",
                $prefix, "_", $description, ".sql"
            )),
        )),+]
    };
}
pub(crate) use migration_set;

pub(crate) fn migrator(set: MigrationSet) -> Migrator {
    let migrations = set
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                Cow::Borrowed(*sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// A file dropped into `migrations/<backend>` but not listed in its set would
/// be silently skipped; the backends' tests catch that with this.
#[cfg(test)]
pub(crate) fn assert_every_file_embedded(backend: &str, set: MigrationSet) {
    #![allow(clippy::unwrap_used)]
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    files.sort();
    let listed: Vec<String> = set
        .iter()
        .map(|(v, d, _)| format!("{v:04}_{d}.sql"))
        .collect();
    assert_eq!(files, listed);
}

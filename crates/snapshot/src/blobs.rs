//! Where file contents go: a content-addressed store keyed by sha256 hex.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Of these sha256-hex hashes, the ones not stored yet.
    async fn missing(&self, hashes: &[String]) -> Result<Vec<String>, String>;
    /// Store blobs (hash, bytes); storing an existing hash again is a no-op.
    async fn put(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), String>;
    async fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, String>;
}

/// An in-memory [`BlobStore`], for tests and benchmarks. It trusts the hashes
/// it is given, as a real store may: restore checks each blob it reads.
#[derive(Default)]
pub struct MemoryBlobs {
    blobs: Mutex<HashMap<String, Arc<Vec<u8>>>>,
}

impl MemoryBlobs {
    pub fn new() -> Self {
        Self::default()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Vec<u8>>>> {
        self.blobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Total bytes of all stored blobs.
    pub fn bytes_stored(&self) -> u64 {
        self.map().values().map(|b| b.len() as u64).sum()
    }

    /// Number of stored blobs.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// Replace a blob's bytes, hash unchanged: lets tests simulate corruption.
    pub fn overwrite(&self, hash: &str, bytes: Vec<u8>) {
        self.map().insert(hash.to_string(), Arc::new(bytes));
    }

    pub fn remove(&self, hash: &str) {
        self.map().remove(hash);
    }
}

#[async_trait]
impl BlobStore for MemoryBlobs {
    async fn missing(&self, hashes: &[String]) -> Result<Vec<String>, String> {
        let map = self.map();
        Ok(hashes
            .iter()
            .filter(|h| !map.contains_key(h.as_str()))
            .cloned()
            .collect())
    }

    async fn put(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), String> {
        let mut map = self.map();
        for (hash, bytes) in blobs {
            map.entry(hash.clone())
                .or_insert_with(|| Arc::new(bytes.clone()));
        }
        Ok(())
    }

    async fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(self.map().get(hash).map(|b| b.as_ref().clone()))
    }
}

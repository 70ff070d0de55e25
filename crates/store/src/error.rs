#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("database error: {0}")]
    Database(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A fenced append (see [`crate::Fence`]) of a turn whose lease its node
    /// no longer holds: nothing of it was stored. Retrying cannot help.
    #[error("lease lost: {0}")]
    LeaseLost(String),
}

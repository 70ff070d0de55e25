//! SQLite backend (to be implemented).

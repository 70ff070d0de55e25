//! (to be implemented)

//! Every query both backends run, written once over the dialect layer
//! (`crate::sql`): each role implemented here holds for any backend.

mod access;
pub(crate) mod parts;
mod pending;
mod sessions;
mod transfer;
mod users;

pub(crate) use sessions::update_session_set;

//! Every query both backends run, written once over the dialect layer
//! (`crate::sql`): each role implemented here holds for any backend.

mod access;
mod pending;
pub(crate) mod reads;
mod sessions;
mod transfer;
mod users;

pub(crate) use sessions::update_session_set;

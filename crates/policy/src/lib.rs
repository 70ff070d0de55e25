//! What an agent may do, decided apart from the loop that asks: the
//! permission rule language and the analysis of shell commands it rests on
//! ([`permissions`]), and user hooks — commands run at points of a turn that
//! can allow, deny or add context ([`hooks`]). Nothing here runs a turn; the
//! engine asks, this crate answers.

pub mod hooks;
pub mod permissions;

//! `agentd sessions rm|checkpoints|rewind|fork`: the session service's
//! operations on local sessions, as `DELETE /v1/sessions/{id}`, `…/rewind`
//! and `…/fork` do them for the server's users.

use agentd_server::session::history::Rewind;
use agentd_server::session::lifecycle::Deleted;
use agentd_server::session::{SessionError, SessionService};
use agentd_store::{SessionRecord, StoreError};

use crate::exit;
use crate::run::LOCAL_USER;

type Outcome = Result<u8, SessionError>;

/// A refusal as an exit code (printed); a store failure goes up.
pub fn refused(err: SessionError) -> Result<u8, StoreError> {
    let code = match err {
        SessionError::Store(err) => return Err(err),
        SessionError::NotFound | SessionError::Missing(_) | SessionError::Invalid(_) => exit::USAGE,
        _ => exit::FAILED,
    };
    eprintln!("agentd: {err}");
    Ok(code)
}

async fn local_session(service: &SessionService, id: &str) -> Result<SessionRecord, SessionError> {
    service
        .owned(LOCAL_USER, id)
        .await
        .map_err(|err| match err {
            SessionError::NotFound => SessionError::Missing(format!("no session with id {id}")),
            err => err,
        })
}

pub async fn rm(service: &SessionService, id: &str) -> Outcome {
    let session = local_session(service, id).await;
    // A turn another process (`agentd run`, `agentd serve`) runs.
    let store = &service.registry().runtime().store;
    if session.is_ok()
        && store
            .running_turns()
            .await?
            .iter()
            .any(|t| t.session_id == id)
    {
        eprintln!("agentd: session {id} has a running turn; interrupt it first");
        return Ok(exit::FAILED);
    }
    match service.delete(session?).await? {
        Deleted::Removed {
            workspace_error: Some(message),
        } => Ok(exit::report(exit::FAILED, message)),
        _ => {
            println!("removed session {id}");
            Ok(exit::OK)
        }
    }
}

pub async fn checkpoints(service: &SessionService, id: &str) -> Outcome {
    local_session(service, id).await?;
    let checkpoints = service.checkpoints(id).await?;
    if checkpoints.is_empty() {
        eprintln!("no checkpoints: no turn of this session has changed its files yet");
        return Ok(exit::OK);
    }
    println!("{:<36}  {:>8}  {:<20}  FILES", "ID", "MESSAGE", "CREATED");
    for c in checkpoints {
        println!(
            "{:<36}  {:>8}  {:<20}  {}",
            c.id,
            c.message_position,
            c.created_at.format("%Y-%m-%d %H:%M:%S"),
            c.files.join(" ")
        );
    }
    Ok(exit::OK)
}

pub async fn rewind(service: &SessionService, id: &str, rewind: Rewind) -> Outcome {
    let session = local_session(service, id).await?;
    let rewound = service.rewind(session, rewind).await?;
    println!(
        "rewound to {}: {} file(s) restored, {} message(s) removed",
        rewound.checkpoint_id,
        rewound.files_restored.len(),
        rewound.messages_removed
    );
    Ok(exit::OK)
}

pub async fn fork(service: &SessionService, id: &str, at: Option<&str>) -> Outcome {
    let session = local_session(service, id).await?;
    println!(
        "{}",
        service.fork(session, LOCAL_USER, at).await?.session.id
    );
    Ok(exit::OK)
}

//! `GET /v1/sessions`: the caller's sessions, filtered (status, dates,
//! project, tag, pinned, archived) and optionally searched (`q`, full
//! text over titles and transcripts, ranked, with a snippet). Also the
//! rule for tags, which `PATCH /v1/sessions/{id}` sets.

use agentd_store::{
    ListCursor, MAX_TAG_CHARS, SearchText, SessionFilter, SessionOrder, SessionStatus,
};
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::Deserialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiQuery, ApiResult, ErrorBody};
use super::sessions::{SessionList, SessionView, view};

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 200;
/// Tags a session may have.
const MAX_TAGS: usize = 20;

const TAG_PATTERN: &str = r"^[a-z0-9][a-z0-9._-]{0,31}$";

/// A tag: 1–32 lowercase letters, digits, `.`, `_`, `-`, starting with a
/// letter or digit.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct Tag(pub String);

impl PartialSchema for Tag {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_TAG_CHARS))
            .pattern(Some(TAG_PATTERN))
            .into()
    }
}

impl ToSchema for Tag {}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    Idle,
    Running,
    Waiting,
}

/// The order of a list (a search is best match first).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    /// Pinned first, then newest first.
    Pinned,
    /// Newest first, pinned or not.
    Created,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Sessions per page, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200, nullable = false)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page (of the same query).
    #[param(nullable = false, min_length = 1)]
    pub cursor: Option<String>,
    /// Full-text search over titles and messages (text, tool calls, tool
    /// results): words that must all be in one message or the title, and
    /// `"quoted phrases"`; nothing else is syntax. Best match first, each
    /// with a `snippet`.
    #[param(nullable = false, min_length = 1, max_length = 500)]
    pub q: Option<String>,
    /// Without `q`: `pinned` (the default), pinned first then newest first;
    /// `created`, newest first, pinned or not.
    #[param(nullable = false, inline)]
    pub sort: Option<SortOrder>,
    #[param(nullable = false, inline)]
    pub status: Option<StatusFilter>,
    /// Created at or after: a date (`2026-01-31`, midnight UTC) or an RFC
    /// 3339 date-time.
    #[param(
        nullable = false,
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2}))?$"
    )]
    pub since: Option<String>,
    /// Created before: a date-time, or a date (that whole day included).
    #[param(
        nullable = false,
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2}))?$"
    )]
    pub until: Option<String>,
    /// Sessions in this project's directory (`GET /v1/projects`).
    #[param(nullable = false, min_length = 1)]
    pub project: Option<String>,
    /// Sessions with this tag.
    #[param(
        nullable = false,
        min_length = 1,
        max_length = 32,
        pattern = r"^[a-z0-9][a-z0-9._-]{0,31}$"
    )]
    pub tag: Option<String>,
    /// Only pinned (`true`) or only unpinned (`false`) sessions.
    #[param(nullable = false)]
    pub pinned: Option<bool>,
    /// Archived sessions are left out unless this is `true` (then only
    /// they are listed).
    #[param(nullable = false)]
    pub archived: Option<bool>,
}

/// The caller's sessions: pinned first, then newest first (or newest first
/// with `sort=created`); or, with `q`, best match first. Archived ones only with `archived=true`.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions",
    params(ListQuery),
    responses(
        (status = 200, body = SessionList),
        (status = 400, description = "A bad limit, cursor, date, tag or search (`q` with no \
            word of letters or digits, more than 16 words), or an unknown project", body = ErrorBody),
        (status = 401, body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn list_sessions(
    State(state): State<AppState>,
    user: User,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Json<SessionList>> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be 1 to {MAX_PAGE}"
        )));
    }
    let mut filter = filter_of(&state, &user, &query).await?;
    // One more than asked tells whether there is a next page.
    filter.limit = limit + 1;
    let mut hits = state.sessions.find(&filter).await?;
    let next_cursor = if hits.len() > limit as usize {
        hits.truncate(limit as usize);
        match filter.text {
            Some(_) => Some((filter.offset + limit).to_string()),
            None => hits
                .last()
                .map(|hit| ListCursor::after(&hit.session).encode()),
        }
    } else {
        None
    };
    let sessions = hits
        .into_iter()
        .map(|hit| SessionView {
            snippet: hit.snippet,
            ..view(&state, hit.session)
        })
        .collect();
    Ok(Json(SessionList {
        sessions,
        next_cursor,
    }))
}

async fn filter_of(state: &AppState, user: &User, query: &ListQuery) -> ApiResult<SessionFilter> {
    let mut filter = SessionFilter::of(&user.name, DEFAULT_PAGE);
    if let Some(q) = &query.q {
        filter.text = Some(SearchText::parse(q).map_err(ApiError::BadRequest)?);
    }
    // A search pages by offset (its order is by rank), a list by the last id.
    match (&query.cursor, &filter.text) {
        (None, _) => {}
        (Some(cursor), Some(_)) => {
            filter.offset = cursor
                .parse()
                .map_err(|_| ApiError::BadRequest("unknown cursor".into()))?;
        }
        (Some(cursor), None) => {
            let cursor = ListCursor::decode(cursor)
                .ok_or_else(|| ApiError::BadRequest("unknown cursor".into()))?;
            filter.before = Some(cursor);
        }
    }
    filter.order = match query.sort {
        None | Some(SortOrder::Pinned) => SessionOrder::PinnedFirst,
        Some(SortOrder::Created) => SessionOrder::Newest,
    };
    filter.status = query.status.map(|status| match status {
        StatusFilter::Idle => SessionStatus::Idle,
        StatusFilter::Running => SessionStatus::Running,
        StatusFilter::Waiting => SessionStatus::Waiting,
    });
    filter.since = query
        .since
        .as_deref()
        .map(|d| instant(d, false))
        .transpose()?;
    filter.until = query
        .until
        .as_deref()
        .map(|d| instant(d, true))
        .transpose()?;
    if let Some(name) = &query.project {
        let runtime = state.registry.runtime();
        let config = &runtime.config;
        // As `GET /v1/projects` lists them: one whose profile is not the
        // caller's is as unknown as one not configured.
        let usable = runtime.access().usable(&user.name, user.is_admin).await?;
        let project = config
            .project(name)
            .filter(|p| {
                p.profile
                    .as_ref()
                    .is_none_or(|profile| usable.profile(config, profile))
            })
            .cloned()
            .ok_or_else(|| ApiError::BadRequest(format!("no project named {name:?}")))?;
        // As sessions on it were created: the directory canonical.
        let dir = tokio::fs::canonicalize(&project.path)
            .await
            .unwrap_or(project.path);
        filter.workspace = Some(dir.to_string_lossy().into_owned());
    }
    filter.tag = query.tag.as_deref().map(check_tag).transpose()?;
    filter.pinned = query.pinned;
    filter.archived = Some(query.archived.unwrap_or(false));
    Ok(filter)
}

/// A date (its midnight UTC, or with `end_of_day` the next midnight) or an
/// RFC 3339 date-time, in the shape of `ListQuery::since`'s pattern.
fn instant(text: &str, end_of_day: bool) -> ApiResult<DateTime<Utc>> {
    let bad = || {
        ApiError::BadRequest(format!(
            "{text:?} is not a date (YYYY-MM-DD) or an RFC 3339 date-time"
        ))
    };
    let date_shape = text.len() >= 10
        && text.bytes().take(10).enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !date_shape {
        return Err(bad());
    }
    if text.len() == 10 {
        let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| bad())?;
        let date = match end_of_day {
            true => date.checked_add_days(Days::new(1)).ok_or_else(bad)?,
            false => date,
        };
        return Ok(date.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    let at = DateTime::parse_from_rfc3339(text).map_err(|_| bad())?;
    Ok(at.with_timezone(&Utc))
}

/// As [`Tag`]'s schema says.
pub(super) fn check_tag(tag: &str) -> ApiResult<String> {
    agentd_store::check_tag(tag).map_err(ApiError::BadRequest)?;
    Ok(tag.to_string())
}

/// Tags to store: each checked, duplicates dropped (first kept), at most
/// [`MAX_TAGS`].
pub(super) fn check_tags(tags: &[Tag]) -> ApiResult<Vec<String>> {
    let mut kept: Vec<String> = Vec::new();
    for Tag(tag) in tags {
        let tag = check_tag(tag)?;
        if !kept.contains(&tag) {
            kept.push(tag);
        }
    }
    if kept.len() > MAX_TAGS {
        return Err(ApiError::BadRequest(format!(
            "a session has at most {MAX_TAGS} tags"
        )));
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn dates_and_date_times() {
        let day = instant("2026-01-31", false).unwrap();
        assert_eq!(day.to_rfc3339(), "2026-01-31T00:00:00+00:00");
        let through = instant("2026-01-31", true).unwrap();
        assert_eq!(through.to_rfc3339(), "2026-02-01T00:00:00+00:00");
        let at = instant("2026-01-31T10:00:00+02:00", false).unwrap();
        assert_eq!(at.to_rfc3339(), "2026-01-31T08:00:00+00:00");
        for bad in [
            "",
            "yesterday",
            "2026-1-31",
            "02026-01-31",
            "2026-13-01",
            "2026-01-31T",
        ] {
            assert!(instant(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn tags() {
        assert_eq!(check_tag("db_1.x-y").unwrap(), "db_1.x-y");
        for bad in ["", "Ops", "-x", "a b", "a\"b", "é", &"a".repeat(33)] {
            assert!(check_tag(bad).is_err(), "{bad}");
        }
        let many: Vec<Tag> = (0..21).map(|i| Tag(format!("t{i}"))).collect();
        assert!(check_tags(&many).is_err());
        let twice = [Tag("a".into()), Tag("a".into())];
        assert_eq!(check_tags(&twice).unwrap(), ["a"]);
    }
}

//! [`SessionStore::find_sessions`](crate::SessionStore::find_sessions): an
//! owner's sessions filtered, listed pinned first, or ranked by a full-text
//! search. The documents searched (`search_docs`: titles and each message's
//! text) are kept by triggers of the migrations; only the match differs
//! between backends (FTS5's `MATCH`, PostgreSQL's `@@` over a GIN index).

use crate::dialect::sql;
use crate::records::SESSION_COLUMNS;

/// The filters of every list, over `sessions AS s`: `$1` owner, `$2`
/// status, `$3` created since, `$4` created before, `$5` workspace, `$6`
/// tag pattern ([`crate::SessionFilter::tag_pattern`]), `$7` pinned, `$8`
/// archived; `$9` is the page size.
const FILTERS: &str = "s.owner = $1 \
    AND ($2 IS NULL OR s.status = $2) \
    AND ($3 IS NULL OR s.created_at >= $3) \
    AND ($4 IS NULL OR s.created_at < $4) \
    AND ($5 IS NULL OR s.workspace = $5) \
    AND ($6 IS NULL OR s.tags LIKE $6 ESCAPE '\\') \
    AND ($7 IS NULL OR s.pinned = $7) \
    AND ($8 IS NULL OR s.archived = $8)";

sql!(
    /// Pinned first, then newest first; `$10`–`$12` the cursor's pinned,
    /// created_at and id (all NULL for the first page).
    pub(crate) LIST = "SELECT ", SESSION_COLUMNS, " FROM sessions AS s WHERE ", FILTERS,
    " AND ($10 IS NULL OR (s.pinned, s.created_at, s.id) < ($10, $11, $12)) \
     ORDER BY s.pinned DESC, s.created_at DESC, s.id DESC LIMIT $9"
);

sql!(
    /// Newest first; `$10`, `$11` the cursor's created_at and id (NULL for
    /// the first page).
    pub(crate) LIST_NEWEST = "SELECT ", SESSION_COLUMNS, " FROM sessions AS s WHERE ", FILTERS,
    " AND ($10 IS NULL OR (s.created_at, s.id) < ($10, $11)) \
     ORDER BY s.created_at DESC, s.id DESC LIMIT $9"
);

// Both searches rank only the owner's matching documents that pass the
// filters (never every user's), keep each session's best, and make a snippet
// of up to 16 words around the match (no markers: clients mark the words
// themselves) only for the sessions of the page. A title match counts double.
sql!(
    /// `$10` an FTS5 query ([`crate::SearchText::fts5_query`]), `$11` the
    /// offset. FTS5's `bm25` and `snippet` need the full-text table scanned
    /// by its `MATCH` (hence `CROSS JOIN`, which keeps it the outer loop);
    /// bm25 is lower for better matches; with `MIN`, SQLite takes the bare
    /// `doc` from the best row of each session.
    pub(crate) SQLITE_SEARCH = "WITH hits AS MATERIALIZED (\
        SELECT d.session_id AS session_id, search_fts.rowid AS doc, \
               bm25(search_fts) * (CASE WHEN d.message_id IS NULL THEN 2.0 ELSE 1.0 END) AS score \
        FROM search_fts CROSS JOIN search_docs AS d CROSS JOIN sessions AS s \
        WHERE search_fts MATCH $10 AND d.rowid = search_fts.rowid AND s.id = d.session_id AND ", FILTERS, "), \
     best AS (SELECT session_id, MIN(score) AS score, doc FROM hits GROUP BY session_id), \
     page AS (SELECT session_id, score, doc FROM best ORDER BY score, session_id LIMIT $9 OFFSET $11) \
     SELECT ", SESSION_COLUMNS, ", (SELECT snippet(search_fts, 0, '', '', '…', 16) FROM search_fts \
        WHERE search_fts MATCH $10 AND search_fts.rowid = page.doc) AS snippet \
     FROM page JOIN sessions AS s ON s.id = page.session_id \
     ORDER BY page.score, page.session_id"
);

sql!(
    /// `$10` the terms ([`crate::SearchText::terms`]), each made a phrase
    /// query by `phraseto_tsquery` (plain text in, never tsquery syntax),
    /// split into words as the documents are; a term with no word the
    /// database knows as such (a letter outside an ASCII-only LC_CTYPE, say)
    /// makes the query NULL, which matches nothing, rather than being
    /// dropped (which would widen the search). `$11` the offset. The
    /// snippet is of the words (the parser would not see `a-b` as `a b`).
    pub(crate) POSTGRES_SEARCH = "WITH q AS (\
        SELECT (SELECT CASE WHEN bool_and(numnode(t) > 0) \
                       THEN string_agg('(' || t::text || ')', ' & ') END \
                FROM (SELECT phraseto_tsquery('simple'::regconfig, agentd_search_words(w)) AS t \
                      FROM unnest($10::text[]) AS w) AS terms)::tsquery AS query), \
     hits AS (\
        SELECT DISTINCT ON (d.session_id) d.session_id, d.id AS doc, \
               ts_rank(d.doc, q.query) * (CASE WHEN d.message_id IS NULL THEN 2 ELSE 1 END) AS score \
        FROM q, search_docs AS d JOIN sessions AS s ON s.id = d.session_id \
        WHERE d.doc @@ q.query AND ", FILTERS,
    " ORDER BY d.session_id, score DESC), \
     page AS (SELECT session_id, doc, score FROM hits ORDER BY score DESC, session_id LIMIT $9 OFFSET $11) \
     SELECT ", SESSION_COLUMNS, ", (SELECT ts_headline('simple'::regconfig, agentd_search_words(d.body), \
        q.query, 'MaxFragments=1, MaxWords=16, MinWords=6, StartSel=\"\", StopSel=\"\"') \
        FROM search_docs AS d WHERE d.id = page.doc) AS snippet \
     FROM page JOIN sessions AS s ON s.id = page.session_id CROSS JOIN q \
     ORDER BY page.score DESC, page.session_id"
);

/// `$store`'s `find_sessions_impl`, searching with `$search` (SQL) and the
/// search text bound by `$bind_text` (a `fn(&SearchText) -> value`).
macro_rules! find_sessions_impl {
    ($store:ty, $search:expr, $bind_text:expr) => {
        const _: () = {
            use $crate::queries::search as q;
            use $crate::records::{Columns, fetch_all, session, to_ms};
            use $crate::{SessionFilter, SessionHit, StoreResult};

            impl $store {
                pub(crate) async fn find_sessions_impl(
                    &self,
                    filter: &SessionFilter,
                ) -> StoreResult<Vec<SessionHit>> {
                    // The filters' values, `$1` to `$9`. Planned for each
                    // call's filters: PostgreSQL's generic plan of a prepared
                    // statement, with every `$n IS NULL OR …` unknown, sorts
                    // all of an owner's sessions instead of reading one page
                    // of an index.
                    let filtered = |sql: &'static str| {
                        sqlx::query(sql)
                            .persistent(false)
                            .bind(filter.owner.as_str())
                            .bind(filter.status.map($crate::SessionStatus::as_str))
                            .bind(filter.since.map(to_ms))
                            .bind(filter.until.map(to_ms))
                            .bind(filter.workspace.as_deref())
                            .bind(filter.tag_pattern())
                            .bind(filter.pinned)
                            .bind(filter.archived)
                            .bind(i64::from(filter.limit))
                    };
                    if let Some(text) = &filter.text {
                        // Whatever is stored is found, indexed or not yet.
                        self.catch_up_search().await?;
                        let query = filtered($search)
                            .bind(($bind_text)(text))
                            .bind(i64::from(filter.offset));
                        return fetch_all(&self.pool, query, "searching sessions", |row| {
                            Ok(SessionHit {
                                session: session(row)?,
                                snippet: row.opt_text("snippet")?,
                            })
                        })
                        .await;
                    }
                    let cursor = filter.before.as_ref();
                    let at = cursor.map(|c| to_ms(c.created_at));
                    let id = cursor.map(|c| c.id.as_str());
                    let query = match filter.order {
                        $crate::SessionOrder::PinnedFirst => filtered(q::LIST)
                            .bind(cursor.map(|c| c.pinned))
                            .bind(at)
                            .bind(id),
                        $crate::SessionOrder::Newest => filtered(q::LIST_NEWEST).bind(at).bind(id),
                    };
                    fetch_all(&self.pool, query, "listing sessions", |row| {
                        Ok(SessionHit {
                            session: session(row)?,
                            snippet: None,
                        })
                    })
                    .await
                }
            }
        };
    };
}
pub(crate) use find_sessions_impl;

//! [`WebhookStore`](crate::WebhookStore): the webhook outbox.

use crate::dialect::sql;

pub(crate) const DELIVERY_COLUMNS: &str = "id, webhook, event, session_id, payload, status, \
    attempts, last_status, last_error, next_attempt_at, created_at, delivered_at";

// Once per id (a retried insert that had committed adds nothing), and only
// while the session exists (its rows go with it).
pub(crate) const INSERT: &str = "INSERT INTO webhook_deliveries \
     (id, webhook, event, session_id, payload, next_attempt_at, created_at) \
     SELECT $1, $2, $3, $4, $5, $6, $6 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $4) \
     ON CONFLICT (id) DO NOTHING";

// Due rows of webhook $3, not leased, and no earlier pending row of its
// webhook and session: a session's events go out in order, an earlier one
// delivered or given up.
sql!(pub(crate) DUE = "SELECT ", DELIVERY_COLUMNS, " FROM webhook_deliveries d \
     WHERE d.webhook = $3 AND d.status = 'pending' AND d.next_attempt_at <= $1 \
     AND (d.lease_until IS NULL OR d.lease_until <= $1) \
     AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e \
         WHERE e.webhook = d.webhook AND e.session_id = d.session_id \
         AND e.status = 'pending' AND e.seq < d.seq) \
     ORDER BY d.seq LIMIT $2");

/// The lease is taken only if nobody holds it and the row is still due:
/// PostgreSQL re-checks the condition on the row's latest version, so one of
/// two claimers wins, and a row another sender rescheduled since it was read
/// waits for its time.
pub(crate) const CLAIM: &str = "UPDATE webhook_deliveries SET lease_owner = $1, lease_until = $2 \
     WHERE id = $3 AND status = 'pending' AND next_attempt_at <= $4 \
     AND (lease_until IS NULL OR lease_until <= $4)";

pub(crate) const RECORD: &str = "UPDATE webhook_deliveries SET status = $1, \
     attempts = attempts + 1, last_status = $2, last_error = $3, \
     next_attempt_at = COALESCE(CAST($4 AS BIGINT), next_attempt_at), delivered_at = $5, \
     lease_owner = NULL, lease_until = NULL \
     WHERE id = $6 AND lease_owner = $7";

/// A stopping sender hands its rows back at once.
pub(crate) const RELEASE: &str = "UPDATE webhook_deliveries \
     SET lease_owner = NULL, lease_until = NULL \
     WHERE lease_owner = $1 AND status = 'pending'";

pub(crate) const PRUNE: &str = "DELETE FROM webhook_deliveries \
     WHERE webhook = $1 AND status <> 'pending' AND created_at < $2";

/// The earliest time a pending row of webhook $1 is due.
pub(crate) const NEXT_DUE: &str = "SELECT MIN(next_attempt_at) FROM webhook_deliveries \
     WHERE webhook = $1 AND status = 'pending'";

sql!(pub(crate) LIST = "SELECT ", DELIVERY_COLUMNS, " FROM webhook_deliveries \
     WHERE status = $1 ORDER BY seq DESC LIMIT $2");

sql!(pub(crate) LIST_ALL = "SELECT ", DELIVERY_COLUMNS, " FROM webhook_deliveries \
     ORDER BY seq DESC LIMIT $1");

macro_rules! webhook_store {
    ($store:ty) => {
        const _: () = {
            use chrono::{DateTime, Utc};

            use $crate::StoreResult;
            use $crate::queries::webhooks as q;
            use $crate::records::{delivery, execute, fetch_all, to_ms};
            use $crate::webhooks::{AttemptResult, DeliveryRecord, DeliveryStatus, NewDelivery};

            #[async_trait::async_trait]
            impl $crate::WebhookStore for $store {
                async fn enqueue_delivery(&self, delivery: &NewDelivery) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::INSERT)
                        .bind(&delivery.id)
                        .bind(&delivery.webhook)
                        .bind(&delivery.event)
                        .bind(&delivery.session_id)
                        .bind(&delivery.payload)
                        .bind(to_ms(delivery.created_at));
                    execute(self.writer(), query, "queueing a webhook delivery").await?;
                    Ok(())
                }

                async fn claim_deliveries(
                    &self,
                    owner: &str,
                    webhooks: &[String],
                    now: DateTime<Utc>,
                    lease_until: DateTime<Utc>,
                    limit: u32,
                ) -> StoreResult<Vec<DeliveryRecord>> {
                    let mut claimed = Vec::new();
                    for webhook in webhooks {
                        let room = u64::from(limit).saturating_sub(claimed.len() as u64);
                        if room == 0 {
                            break;
                        }
                        let query = sqlx::query(q::DUE)
                            .bind(to_ms(now))
                            .bind(i64::try_from(room).unwrap_or(i64::MAX))
                            .bind(webhook);
                        let due = fetch_all(
                            &self.pool,
                            query,
                            "reading due webhook deliveries",
                            delivery,
                        )
                        .await?;
                        for record in due {
                            let _write = self.write_guard().await;
                            let query = sqlx::query(q::CLAIM)
                                .bind(owner)
                                .bind(to_ms(lease_until))
                                .bind(&record.id)
                                .bind(to_ms(now));
                            let done = execute(self.writer(), query, "claiming a webhook delivery")
                                .await?;
                            if done.rows_affected() == 1 {
                                claimed.push(record);
                            }
                        }
                    }
                    Ok(claimed)
                }

                async fn release_deliveries(&self, owner: &str) -> StoreResult<u64> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::RELEASE).bind(owner);
                    let done =
                        execute(self.writer(), query, "releasing webhook deliveries").await?;
                    Ok(done.rows_affected())
                }

                async fn prune_deliveries(
                    &self,
                    webhook: &str,
                    created_before: DateTime<Utc>,
                ) -> StoreResult<u64> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::PRUNE)
                        .bind(webhook)
                        .bind(to_ms(created_before));
                    let done = execute(self.writer(), query, "pruning webhook deliveries").await?;
                    Ok(done.rows_affected())
                }

                async fn next_delivery_due(
                    &self,
                    webhooks: &[String],
                ) -> StoreResult<Option<DateTime<Utc>>> {
                    let mut earliest: Option<i64> = None;
                    for webhook in webhooks {
                        let due: Option<i64> = sqlx::query_scalar(q::NEXT_DUE)
                            .bind(webhook)
                            .fetch_one(&self.pool)
                            .await
                            .map_err($crate::records::db("reading the next webhook delivery"))?;
                        earliest = match (earliest, due) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                    }
                    earliest
                        .map(|ms| $crate::records::from_ms(ms, "next_attempt_at"))
                        .transpose()
                }

                async fn record_attempt(
                    &self,
                    id: &str,
                    owner: &str,
                    result: &AttemptResult,
                ) -> StoreResult<bool> {
                    let delivered_at = (result.status == DeliveryStatus::Delivered)
                        .then(|| to_ms($crate::records::now()));
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::RECORD)
                        .bind(result.status.as_str())
                        .bind(result.http_status.map(i64::from))
                        .bind(&result.error)
                        .bind(result.next_attempt_at.map(to_ms))
                        .bind(delivered_at)
                        .bind(id)
                        .bind(owner);
                    let done = execute(self.writer(), query, "recording a webhook attempt").await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn list_deliveries(
                    &self,
                    status: Option<DeliveryStatus>,
                    limit: u32,
                ) -> StoreResult<Vec<DeliveryRecord>> {
                    let query = match status {
                        // Planned per status: the generic plan of a prepared
                        // statement reads every delivery to find the few failed.
                        Some(status) => sqlx::query(q::LIST)
                            .persistent(false)
                            .bind(status.as_str())
                            .bind(i64::from(limit)),
                        None => sqlx::query(q::LIST_ALL).bind(i64::from(limit)),
                    };
                    fetch_all(&self.pool, query, "listing webhook deliveries", delivery).await
                }
            }
        };
    };
}
pub(crate) use webhook_store;

-- Spend summed per owner and UTC day. Quotas read a day's and a month's
-- spend before each turn; summing every cost increase of the month made that
-- read grow with the month's turns (~5 ms a message at 20 000 increases). A
-- day's row is at most 31 rows to sum for a month.
CREATE TABLE spend_days (
    owner    TEXT NOT NULL,
    -- The day's first millisecond (UTC, since the epoch).
    day      INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    PRIMARY KEY (owner, day)
) STRICT, WITHOUT ROWID;

INSERT INTO spend_days (owner, day, cost_usd)
SELECT owner, at - at % 86400000, SUM(cost_usd) FROM spend
GROUP BY owner, at - at % 86400000;

DROP TRIGGER sessions_spend;
CREATE TRIGGER sessions_spend AFTER UPDATE OF cost_usd ON sessions
WHEN NEW.cost_usd > OLD.cost_usd
BEGIN
    INSERT INTO spend_days (owner, day, cost_usd)
    VALUES (NEW.owner, NEW.updated_at - NEW.updated_at % 86400000, NEW.cost_usd - OLD.cost_usd)
    ON CONFLICT (owner, day) DO UPDATE SET cost_usd = spend_days.cost_usd + excluded.cost_usd;
END;

DROP TABLE spend;

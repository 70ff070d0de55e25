-- Spend summed per owner and UTC day. Quotas read a day's and a month's
-- spend before each turn; summing every cost increase of the month made that
-- read grow with the month's turns. A month is at most 31 rows to sum.
CREATE TABLE IF NOT EXISTS spend_days (
    owner    TEXT NOT NULL,
    -- The day's first millisecond (UTC, since the epoch).
    day      BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (owner, day)
);

-- No increase may land in `spend` between the copy and the drop.
LOCK TABLE spend IN EXCLUSIVE MODE;
INSERT INTO spend_days (owner, day, cost_usd)
SELECT owner, at - at % 86400000, SUM(cost_usd) FROM spend
GROUP BY owner, at - at % 86400000
ON CONFLICT (owner, day) DO UPDATE SET cost_usd = spend_days.cost_usd + EXCLUDED.cost_usd;

CREATE OR REPLACE FUNCTION agentd_record_spend() RETURNS trigger AS $$
BEGIN
    IF NEW.cost_usd > OLD.cost_usd THEN
        INSERT INTO spend_days (owner, day, cost_usd)
        VALUES (NEW.owner, NEW.updated_at - NEW.updated_at % 86400000,
                NEW.cost_usd - OLD.cost_usd)
        ON CONFLICT (owner, day)
        DO UPDATE SET cost_usd = spend_days.cost_usd + EXCLUDED.cost_usd;
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

DROP TABLE spend;

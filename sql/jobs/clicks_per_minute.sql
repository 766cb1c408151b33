-- A streaming job, written once: clicks per minute and category, with a lookup join on a
-- dimension table. Run it continuously:
--   sparkext-sql stream sql/jobs/clicks_per_minute.sql --checkpoint /tmp/clicks-ck
-- or recompute a range with the same text:
--   sparkext-sql backfill sql/jobs/clicks_per_minute.sql --from '2026-11-20' --to '2026-11-21' --dry-run

CREATE TABLE lake.demo.clicks (
  user_id BIGINT,
  item_id BIGINT,
  ts TIMESTAMP,
  proc AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS
);

CREATE TABLE lake.demo.items (item_id BIGINT, category STRING);

CREATE TABLE lake.demo.clicks_per_minute (
  window_start TIMESTAMP,
  window_end TIMESTAMP,
  category STRING,
  clicks BIGINT
) PARTITIONED BY (days(window_start));

INSERT INTO lake.demo.clicks_per_minute
SELECT window_start, window_end, i.category, COUNT(*) AS clicks
FROM TABLE(TUMBLE(TABLE lake.demo.clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS c
JOIN lake.demo.items FOR SYSTEM_TIME AS OF c.proc AS i ON c.item_id = i.item_id
GROUP BY window_start, window_end, i.category;

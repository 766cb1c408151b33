-- The sources of the streaming job sql/jobs/clicks_per_minute.sql: three items in two categories
-- and ten clicks over three minutes of 2026-11-20. The job's sink is dropped too, so that the
-- README's stream and backfill start over (with a new checkpoint: sparkext-demo --data clears it).
CREATE NAMESPACE IF NOT EXISTS lake.demo;
DROP TABLE IF EXISTS lake.demo.clicks PURGE;
DROP TABLE IF EXISTS lake.demo.items PURGE;
DROP TABLE IF EXISTS lake.demo.clicks_per_minute PURGE;
CREATE TABLE lake.demo.items (item_id BIGINT, category STRING) USING iceberg;
INSERT INTO lake.demo.items VALUES (1, 'books'), (2, 'books'), (3, 'games');
CREATE TABLE lake.demo.clicks (user_id BIGINT, item_id BIGINT, ts TIMESTAMP) USING iceberg;
INSERT INTO lake.demo.clicks VALUES
  (7, 1, TIMESTAMP '2026-11-20 10:00:05'), (7, 3, TIMESTAMP '2026-11-20 10:00:20'),
  (8, 2, TIMESTAMP '2026-11-20 10:00:41'), (9, 3, TIMESTAMP '2026-11-20 10:00:59'),
  (8, 1, TIMESTAMP '2026-11-20 10:01:10'), (9, 1, TIMESTAMP '2026-11-20 10:01:30'),
  (7, 2, TIMESTAMP '2026-11-20 10:01:45'), (8, 3, TIMESTAMP '2026-11-20 10:02:02'),
  (9, 3, TIMESTAMP '2026-11-20 10:02:30'), (7, 1, TIMESTAMP '2026-11-20 10:02:58');

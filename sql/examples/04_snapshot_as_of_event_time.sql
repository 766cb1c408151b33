-- snapshot_as_of_event_time on the table 02_ingest_cdc.sql wrote: shop.orders as it was at
-- midnight between its two days, although the table committed both days' changes later (and
-- 03_rewrite_equality_deletes.sql rewrote its deletes).

-- a table, usable in FROM and JOIN
SELECT * FROM sparkext.snapshot_as_of_event_time('lake.ods.orders', TIMESTAMP '2026-11-21 00:00:00')
ORDER BY id;

-- the daily snapshot, materialised: (re)writes partition dt = '2026-11-21' of the target
CALL sparkext.snapshot_as_of_event_time(
  table => 'lake.ods.orders',
  as_of => TIMESTAMP '2026-11-21 00:00:00',
  target => 'lake.dw.orders_daily',
  partition_value => '2026-11-21');
SELECT * FROM lake.dw.orders_daily ORDER BY id;

-- the same state as an Iceberg tag of the table itself: one small commit on a branch from the
-- base (what changed by T0), no copy; every engine reads it with VERSION AS OF
CALL sparkext.snapshot_as_of_event_time(
  table => 'lake.ods.orders',
  as_of => TIMESTAMP '2026-11-21 00:00:00',
  tag => 'day_one');
SELECT id, customer, status, amount FROM lake.ods.orders VERSION AS OF 'day_one' ORDER BY id;

-- for cron: tag each day that closed (newest event time past its end + 1 hour) as et_<day>
CALL sparkext.tag_event_time_days(table => 'lake.ods.orders');
SELECT tag, as_of, how, rows_changed, late_commits FROM sparkext.event_time_tags('lake.ods.orders');

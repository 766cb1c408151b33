-- tiered_optimize on a table written in small commits: the table names its cluster columns and
-- thresholds once (sparkext.optimize.*), so the call needs only the table name.
CREATE TABLE lake.db.events (user_id string, item bigint, day date) USING iceberg
PARTITIONED BY (day)
TBLPROPERTIES ('sparkext.optimize.cluster-by' = 'user_id,item',
               'sparkext.optimize.l0.min-files' = '3');
INSERT INTO lake.db.events
SELECT concat('user_0000000', id % 50), id, DATE '2026-11-21' FROM range(0, 300);
INSERT INTO lake.db.events
SELECT concat('user_0000000', id % 50), id, DATE '2026-11-21' FROM range(300, 600);
INSERT INTO lake.db.events
SELECT concat('user_0000000', id % 50), id, DATE '2026-11-21' FROM range(600, 900);
CALL sparkext.tiered_optimize(table => 'lake.db.events', dry_run => true);
CALL sparkext.tiered_optimize(table => 'lake.db.events');
CALL sparkext.tiered_optimize(table => 'lake.db.events', levels => 'l2', curve => 'hilbert');
SELECT partition, data_files, level0_bytes, optimized_share
FROM sparkext.table_health('lake.db.events');

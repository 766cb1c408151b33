-- Quick start: a partitioned merge-on-read table, a few small commits, its health.
-- Runs as is: sparkext-sql -f sql/examples/01_quickstart.sql (the README's table_health section).
CREATE NAMESPACE IF NOT EXISTS lake.db;
DROP TABLE IF EXISTS lake.db.orders PURGE;
CREATE TABLE lake.db.orders (id BIGINT, customer STRING, amount DECIMAL(10, 2), order_day DATE)
USING iceberg PARTITIONED BY (order_day)
TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read',
  'write.update.mode' = 'merge-on-read');
-- small commits, as a streaming writer makes them, then merge-on-read deletes
INSERT INTO lake.db.orders VALUES (1, 'ana', 12.50, DATE '2026-11-20'), (2, 'bo', 7.00, DATE '2026-11-20');
INSERT INTO lake.db.orders VALUES (3, 'chen', 99.90, DATE '2026-11-21'), (4, 'dana', 15.00, DATE '2026-11-21');
INSERT INTO lake.db.orders VALUES (5, 'eli', 42.00, DATE '2026-11-21'), (6, 'fu', 3.20, DATE '2026-11-21');
INSERT INTO lake.db.orders VALUES (7, 'gus', 8.80, DATE '2026-11-21'), (8, 'hana', 23.00, DATE '2026-11-21');
DELETE FROM lake.db.orders WHERE id = 4;
DELETE FROM lake.db.orders WHERE id = 6;
UPDATE lake.db.orders SET amount = 25.00 WHERE id = 8;

CALL sparkext.table_health(table => 'lake.db.orders');
CALL sparkext.table_health('lake.db.orders', map('small-file-threshold-bytes', '67108864'));
SELECT partition, small_files, health_score FROM sparkext.table_health('lake.db.orders')
WHERE health_score < 60 ORDER BY health_score;

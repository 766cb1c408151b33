-- sparkext demo: a small merge-on-read table with a few commits, then its health.
-- Runs on the embedded default (local Spark, warehouse ~/.sparkext/warehouse): sparkext-demo, or
--   sparkext-sql --echo -f sql/demo.sql
CREATE NAMESPACE IF NOT EXISTS lake.demo;
DROP TABLE IF EXISTS lake.demo.orders PURGE;

CREATE TABLE lake.demo.orders (
  order_id  BIGINT,
  customer  STRING,
  amount    DECIMAL(10, 2),
  order_day DATE
) USING iceberg
PARTITIONED BY (order_day)
TBLPROPERTIES (
  'format-version' = '2',
  'write.delete.mode' = 'merge-on-read',
  'write.update.mode' = 'merge-on-read'
);

-- three commits of small files: the kind a streaming writer leaves behind
INSERT INTO lake.demo.orders VALUES
  (1, 'ana',   12.50, DATE '2026-11-20'), (2, 'bo',  7.00, DATE '2026-11-20'),
  (3, 'chen',  99.90, DATE '2026-11-21');
INSERT INTO lake.demo.orders VALUES
  (4, 'dana',  15.00, DATE '2026-11-21'), (5, 'eli', 42.00, DATE '2026-11-21');
INSERT INTO lake.demo.orders VALUES
  (6, 'fu',     3.20, DATE '2026-11-22');

-- merge-on-read changes: position-delete files instead of rewritten data files
DELETE FROM lake.demo.orders WHERE order_id = 2;
UPDATE lake.demo.orders SET amount = 45.00 WHERE order_id = 5;

SELECT order_day, count(*) AS orders, sum(amount) AS revenue
FROM lake.demo.orders GROUP BY order_day ORDER BY order_day;

CALL sparkext.table_health(table => 'lake.demo.orders');

-- a table function works wherever a table does
SELECT partition, data_files, small_files, position_delete_files, health_score
FROM sparkext.table_health('lake.demo.orders')
WHERE position_delete_files > 0;

CALL sparkext.help();

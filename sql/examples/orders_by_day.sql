-- Orders and revenue per day of lake.db.orders (01_quickstart.sql makes it). The name is left
-- unqualified: sparkext-sql -f sql/examples/orders_by_day.sql --database lake.db
SELECT order_day, count(*) AS orders, sum(amount) AS revenue
FROM orders GROUP BY order_day ORDER BY order_day;

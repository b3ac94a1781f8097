-- A nightly Hive job: flatten order items and tag them with the buyer's country.
SET hive.exec.dynamic.partition.mode=nonstrict;

USE ods;

CREATE TEMPORARY TABLE tmp_items AS
SELECT o.order_id, o.user_id, it.sku, it.qty
FROM orders o
LATERAL VIEW inline(o.items) it AS sku, qty
WHERE o.dt = '2024-03-10';

INSERT OVERWRITE TABLE dw.order_items PARTITION (dt='2024-03-10')
SELECT t.order_id, u.country, t.sku, t.qty
FROM tmp_items t
JOIN users u ON t.user_id = u.user_id;

DROP TABLE tmp_items;

-- One statement per form of issue 18 (SQL as people write it), Spark SQL, ${target} given
-- with --var. tests/collect/test_sql_forms_file.py ingests it with the CLI; each statement's
-- expected lineage is written beside it, worked out by hand.

-- a query in parentheses: s1.a → t1.a, s1.b → t1.b
CREATE TABLE dw.t1 (a INT, b STRING);
INSERT INTO dw.t1 (SELECT a, b FROM src.s1);
-- s1.a → t2.a, s1.b → t2.b
CREATE TABLE dw.t2 AS (SELECT a, b FROM src.s1);
-- s1.a → v.a
CREATE VIEW dw.v AS (SELECT a FROM src.s1);

-- DDL earlier in the log: c.x, c.y, c.z → t3.x, t3.y, t3.z
CREATE TABLE src.c (x INT, y STRING);
ALTER TABLE src.c ADD COLUMNS (z STRING);
INSERT OVERWRITE TABLE dw.t3 SELECT * FROM src.c;
-- a rename: c.x, c.y, c.z → c2.x, c2.y, c2.z
ALTER TABLE src.c RENAME TO src.c2;
-- a clone of the renamed table: c2.x, c2.y, c2.z → cl.x, cl.y, cl.z
CREATE TABLE dw.cl SHALLOW CLONE src.c2;

-- Hive's FROM-first form over a CTE: kv.key → s1.key, kv.value → s1.value (q is no table)
WITH q AS (SELECT key, value FROM src.kv WHERE key = '5') FROM q INSERT OVERWRITE TABLE dw.s1 SELECT key, value;

-- VALUES with a subquery: ids.id → vals.top
CREATE TABLE dw.vals (n INT, top BIGINT);
INSERT INTO dw.vals VALUES (1, (SELECT max(id) FROM src.ids));

-- a USING join of two unnamed subqueries: x.a, y.a → o.a; x.b → o.b; y.c → o.c
INSERT INTO dw.o SELECT * FROM (SELECT a, b FROM src.x) JOIN (SELECT a, c FROM src.y) USING (a);

-- a procedure body: s1.a → p.a
CREATE PROCEDURE dw.load_p() BEGIN INSERT INTO dw.p SELECT a FROM src.s1; END;

-- a Hive virtual column: kv.key → f.key, and nothing into f.f
INSERT OVERWRITE TABLE dw.f SELECT INPUT__FILE__NAME AS f, key FROM src.kv;

-- files as targets and sources: s1.a → /exports/x.a; /landing/kv.txt → kv
INSERT OVERWRITE DIRECTORY '/exports/x' USING parquet SELECT a FROM src.s1;
LOAD DATA INPATH '/landing/kv.txt' INTO TABLE src.kv;

-- a read: s1 read by this run
SELECT a, count(*) FROM src.s1 GROUP BY a;

-- UPDATE without FROM: t1.a → t1.b
UPDATE dw.t1 SET b = upper(a) WHERE a IS NOT NULL;
-- DELETE reading another table: gone.a → t1.a, t1.b (FILTER)
DELETE FROM dw.t1 WHERE a IN (SELECT a FROM src.gone);

-- a correlated LATERAL subquery: users.id → lat.id, orders.amount → lat.amount
INSERT INTO dw.lat SELECT u.id, l.amount FROM src.users u JOIN LATERAL (SELECT o.amount FROM src.orders o WHERE o.user_id = u.id) l;

-- a recursive CTE: tree.id → tree_all.id
INSERT INTO dw.tree_all WITH RECURSIVE r AS (SELECT id FROM src.tree WHERE parent_id IS NULL UNION ALL SELECT t.id FROM src.tree t JOIN r ON t.parent_id = r.id) SELECT id FROM r;

-- a variable: s1.a → var_target.a
INSERT INTO ${target} SELECT a FROM src.s1;

-- statements that move no data
SET spark.sql.shuffle.partitions = 4;
SHOW TABLES;
DROP TABLE IF EXISTS dw.scratch;

-- Held-out statements, written (with their expectations) after Tracelake's collector scored
-- 100% on the first 177 hand-checked statements, and committed before any tool ran on them.
-- They aim at constructs the first set does not cover. Sources are the tpcds and dating tables.

-- @id: holdout_001
-- a CTE named like a real table shadows it
INSERT OVERWRITE TABLE mart.big_ticket_lines
WITH store_sales AS (
  SELECT ss_ticket_number, ss_item_sk, ss_net_paid
  FROM tpcds.store_sales
  WHERE ss_net_paid > 1000
)
SELECT store_sales.ss_ticket_number, item.i_product_name, store_sales.ss_net_paid
FROM store_sales
JOIN tpcds.item item ON item.i_item_sk = store_sales.ss_item_sk;

-- @id: holdout_002
-- lateral column alias (Spark 3.4+): margin_ratio reads the margin defined just before
INSERT OVERWRITE TABLE mart.ticket_margin
SELECT ss_ticket_number,
       ss_net_paid - ss_ext_wholesale_cost AS margin,
       margin / NULLIF(ss_net_paid, 0) AS margin_ratio
FROM tpcds.store_sales;

-- @id: holdout_003
-- correlated scalar subquery in the select list
INSERT OVERWRITE TABLE mart.customer_last_sale
SELECT c.c_customer_sk,
       c.c_email_address,
       (SELECT max(s.ss_sold_date_sk) FROM tpcds.store_sales s WHERE s.ss_customer_sk = c.c_customer_sk)
         AS last_sold_date_sk
FROM tpcds.customer c;

-- @id: holdout_004
-- nested CASE: sr_fee is both a condition and part of a value
INSERT OVERWRITE TABLE mart.return_credit
SELECT sr_ticket_number,
       CASE WHEN sr_refunded_cash > 0
            THEN CASE WHEN sr_fee > 0 THEN sr_refunded_cash - sr_fee ELSE sr_refunded_cash END
            ELSE sr_store_credit END AS credit
FROM tpcds.store_returns;

-- @id: holdout_005
INSERT OVERWRITE TABLE mart.customer_running_spend
SELECT ws_bill_customer_sk,
       ws_order_number,
       sum(coalesce(ws_net_paid, ws_ext_sales_price))
         OVER (PARTITION BY ws_bill_customer_sk ORDER BY ws_sold_date_sk) AS running_spend
FROM tpcds.web_sales;

-- @id: holdout_006
-- a CTE with a column list renames its outputs
INSERT OVERWRITE TABLE mart.state_revenue
WITH by_state (state, revenue) AS (
  SELECT ca_state, sum(ss_net_paid)
  FROM tpcds.store_sales
  JOIN tpcds.customer_address ON ss_addr_sk = ca_address_sk
  GROUP BY ca_state
)
SELECT state, revenue FROM by_state;

-- @id: holdout_007
-- a derived table with a column alias list
INSERT OVERWRITE TABLE mart.item_price_pairs
SELECT t.sku, t.price
FROM (SELECT i_item_id, i_current_price FROM tpcds.item) AS t (sku, price);

-- @id: holdout_008
-- chained LATERAL VIEWs: the second explodes the first's output
INSERT OVERWRITE TABLE dating.dwd_interest_tokens PARTITION (dt = '2024-05-01')
SELECT user_id, token
FROM dating.user_profile
LATERAL VIEW explode(interests) i AS interest
LATERAL VIEW explode(split(interest, '-')) t AS token
WHERE dt = '2024-05-01';

-- @id: holdout_009
-- a column list that reorders and leaves a column out
INSERT INTO mart.customer_contact (email, customer_sk)
SELECT c_email_address, c_customer_sk
FROM tpcds.customer
WHERE c_email_address IS NOT NULL;

-- @id: holdout_010
MERGE INTO dating.user_directory AS t
USING dating.user_profile AS s
ON t.user_id = s.user_id AND s.dt = '2024-05-01'
WHEN MATCHED THEN UPDATE SET
  t.display_name = initcap(s.username),
  t.updated_ts = current_timestamp()
WHEN NOT MATCHED THEN INSERT (user_id, display_name, city_country, updated_ts)
  VALUES (s.user_id, initcap(s.username), concat_ws(', ', s.city, s.country), current_timestamp());

-- @id: holdout_011
-- predicates as output values
CREATE TABLE mart.store_region_flags USING parquet AS
SELECT s_store_sk,
       s_state IN ('CA', 'OR', 'WA') AS is_west_coast,
       s_number_employees > 250 AS is_large
FROM tpcds.store;

-- @id: holdout_012
INSERT OVERWRITE TABLE mart.customer_last_known_state
SELECT ss_customer_sk,
       ss_ticket_number,
       last_value(ca_state, true) OVER (
         PARTITION BY ss_customer_sk ORDER BY ss_sold_date_sk
         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS last_state
FROM tpcds.store_sales
LEFT JOIN tpcds.customer_address ON ss_addr_sk = ca_address_sk;

-- @id: holdout_013
-- HAVING on an output alias
INSERT OVERWRITE TABLE mart.email_domain_customers
SELECT lower(substring_index(c_email_address, '@', -1)) AS domain,
       count(DISTINCT c_customer_sk) AS customers
FROM tpcds.customer
GROUP BY lower(substring_index(c_email_address, '@', -1))
HAVING customers > 100;

-- @id: holdout_014
-- EXCEPT: the right side only removes rows
INSERT OVERWRITE TABLE mart.store_only_customers
SELECT ss_customer_sk FROM tpcds.store_sales WHERE ss_customer_sk IS NOT NULL
EXCEPT
SELECT ws_bill_customer_sk FROM tpcds.web_sales;

-- @id: holdout_015
-- WITH inside a derived table
INSERT OVERWRITE TABLE mart.category_top_price
SELECT cat, top_price
FROM (
  WITH priced AS (SELECT i_category AS cat, i_current_price AS price FROM tpcds.item)
  SELECT cat, max(price) AS top_price FROM priced GROUP BY cat
) x;

-- @id: holdout_016
INSERT OVERWRITE TABLE dating.dws_report_share PARTITION (dt = '2024-05-01')
SELECT reported_id,
       count(report_id) OVER (PARTITION BY reported_id) AS user_reports,
       count(report_id) OVER () AS all_reports
FROM dating.reports
WHERE dt = '2024-05-01';

-- @id: holdout_017
INSERT OVERWRITE TABLE dating.dws_first_report_reason PARTITION (dt = '2024-05-01')
SELECT reported_id,
       collect_list(reason_code)[0] AS some_reason,
       size(collect_set(reporter_id)) AS reporters
FROM dating.reports
WHERE dt = '2024-05-01'
GROUP BY reported_id;

-- @id: holdout_018
INSERT OVERWRITE TABLE dating.dwd_user_location PARTITION (dt = '2024-05-01')
SELECT user_id, if(city IS NULL, country, city) AS location
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: holdout_019
-- star plus one more column
INSERT OVERWRITE TABLE mart.reason_snapshot
SELECT *, current_date() AS snapshot_date FROM tpcds.reason;

-- @id: holdout_020
-- aliases that swap two column names
CREATE TABLE mart.swapped_names USING parquet AS
SELECT ss_net_paid AS ss_quantity, ss_quantity AS ss_net_paid FROM tpcds.store_sales;

-- @id: holdout_021
-- derived-table aliases named like real tables
INSERT OVERWRITE TABLE mart.priced_sales
SELECT item.sku, store_sales.ss_quantity * item.price AS list_value
FROM (SELECT i_item_sk AS sk, i_item_id AS sku, i_current_price AS price FROM tpcds.item) item
JOIN tpcds.store_sales store_sales ON store_sales.ss_item_sk = item.sk;

-- @id: holdout_022
INSERT OVERWRITE TABLE mart.state_city_sales
SELECT coalesce(s_state, 'ALL') AS state, coalesce(s_city, 'ALL') AS city, sum(ss_net_paid) AS paid
FROM tpcds.store_sales
JOIN tpcds.store ON ss_store_sk = s_store_sk
GROUP BY GROUPING SETS ((s_state, s_city), (s_state), ());

-- @id: holdout_023
-- three branches with different names map by position; one branch has no timestamp
INSERT OVERWRITE TABLE dating.dwd_contact_event PARTITION (dt = '2024-05-01')
SELECT sender_id AS user_id, recipient_id AS other_id, sent_ts AS event_ts
FROM dating.messages WHERE dt = '2024-05-01'
UNION ALL
SELECT user_a, user_b, matched_ts FROM dating.matches WHERE dt = '2024-05-01'
UNION ALL
SELECT swiper_id, swipee_id, CAST(NULL AS TIMESTAMP) FROM dating.swipes WHERE dt = '2024-05-01';

-- @id: holdout_024
CREATE OR REPLACE VIEW dating.v_user_risk_by_country AS
WITH latest AS (
  SELECT user_id, risk_score, updated_ts FROM dating.user_risk
)
SELECT l.user_id,
       p.country,
       l.risk_score,
       avg(l.risk_score) OVER (PARTITION BY p.country) AS country_avg_risk
FROM latest l
JOIN dating.user_profile p ON p.user_id = l.user_id AND p.dt = '2024-05-01';

-- @id: holdout_025
-- EXISTS as a CASE condition; both branches are the price
INSERT OVERWRITE TABLE mart.item_return_flag
SELECT i.i_item_sk,
       CASE WHEN EXISTS (SELECT 1 FROM tpcds.store_returns r WHERE r.sr_item_sk = i.i_item_sk)
            THEN i.i_current_price * 0.9 ELSE i.i_current_price END AS adjusted_price
FROM tpcds.item i;

-- TPC-DS-like warehouse: sources in `tpcds`, derived tables and views in `mart`.
-- Each statement starts with a `-- @id: <id>` line and is self-contained.

-- @id: tpcds_001
-- daily store sales per store and item (static partition)
INSERT OVERWRITE TABLE mart.store_sales_daily PARTITION (dt = '2002-01-01')
SELECT ss_store_sk, ss_item_sk, sum(ss_quantity) AS quantity, sum(ss_net_paid) AS net_paid
FROM tpcds.store_sales
JOIN tpcds.date_dim ON ss_sold_date_sk = d_date_sk
WHERE d_date = DATE '2002-01-01'
GROUP BY ss_store_sk, ss_item_sk;

-- @id: tpcds_002
INSERT OVERWRITE TABLE mart.catalog_sales_daily PARTITION (dt = '2002-01-01')
SELECT cs.cs_call_center_sk, cs.cs_item_sk, sum(cs.cs_quantity), sum(cs.cs_net_paid), sum(cs.cs_net_profit)
FROM tpcds.catalog_sales cs
JOIN tpcds.date_dim d ON cs.cs_sold_date_sk = d.d_date_sk
WHERE d.d_date = DATE '2002-01-01'
GROUP BY cs.cs_call_center_sk, cs.cs_item_sk;

-- @id: tpcds_003
-- dynamic partition: the partition value comes last in the select
INSERT OVERWRITE TABLE mart.web_sales_daily PARTITION (dt)
SELECT ws.ws_web_site_sk AS web_site_sk,
       ws.ws_item_sk AS item_sk,
       sum(ws.ws_quantity) AS quantity,
       sum(ws.ws_net_paid) AS net_paid,
       CAST(d.d_date AS STRING) AS dt
FROM tpcds.web_sales ws
JOIN tpcds.date_dim d ON ws.ws_sold_date_sk = d.d_date_sk
WHERE d.d_year = 2002 AND d.d_moy = 1
GROUP BY ws.ws_web_site_sk, ws.ws_item_sk, d.d_date;

-- @id: tpcds_004
CREATE TABLE mart.dim_item USING parquet AS
SELECT i_item_sk AS item_sk,
       i_item_id AS item_id,
       trim(i_product_name) AS product_name,
       upper(i_brand) AS brand,
       i_class AS class,
       i_category AS category,
       i_current_price AS current_price,
       coalesce(i_color, 'unknown') AS color
FROM tpcds.item
WHERE i_rec_end_date IS NULL;

-- @id: tpcds_005
CREATE OR REPLACE VIEW mart.v_customer_geo AS
SELECT c.c_customer_sk AS customer_sk,
       concat_ws(' ', c.c_first_name, c.c_last_name) AS full_name,
       c.c_email_address AS email,
       ca.ca_city AS city,
       ca.ca_state AS state,
       ca.ca_zip AS zip,
       ca.ca_gmt_offset AS gmt_offset
FROM tpcds.customer c
LEFT JOIN tpcds.customer_address ca ON c.c_current_addr_sk = ca.ca_address_sk;

-- @id: tpcds_006
-- TPC-DS q3
INSERT OVERWRITE TABLE mart.brand_year_sales
SELECT dt.d_year, item.i_brand_id brand_id, item.i_brand brand, sum(ss_ext_sales_price) sum_agg
FROM tpcds.date_dim dt, tpcds.store_sales, tpcds.item
WHERE dt.d_date_sk = store_sales.ss_sold_date_sk
  AND store_sales.ss_item_sk = item.i_item_sk
  AND item.i_manufact_id = 128
  AND dt.d_moy = 11
GROUP BY dt.d_year, item.i_brand, item.i_brand_id
ORDER BY dt.d_year, sum_agg DESC, brand_id
LIMIT 100;

-- @id: tpcds_007
-- TPC-DS q7
INSERT INTO mart.promo_item_averages
SELECT i_item_id,
       avg(ss_quantity) agg1,
       avg(ss_list_price) agg2,
       avg(ss_coupon_amt) agg3,
       avg(ss_sales_price) agg4
FROM tpcds.store_sales, tpcds.customer_demographics, tpcds.date_dim, tpcds.item, tpcds.promotion
WHERE ss_sold_date_sk = d_date_sk
  AND ss_item_sk = i_item_sk
  AND ss_cdemo_sk = cd_demo_sk
  AND ss_promo_sk = p_promo_sk
  AND cd_gender = 'M'
  AND cd_marital_status = 'S'
  AND cd_education_status = 'College'
  AND (p_channel_email = 'N' OR p_channel_event = 'N')
  AND d_year = 2000
GROUP BY i_item_id
ORDER BY i_item_id
LIMIT 100;

-- @id: tpcds_008
-- TPC-DS q19
INSERT OVERWRITE TABLE mart.brand_manager_sales PARTITION (report_month = '1998-11')
SELECT i_brand_id brand_id, i_brand brand, i_manufact_id, i_manufact, sum(ss_ext_sales_price) ext_price
FROM tpcds.date_dim, tpcds.store_sales, tpcds.item, tpcds.customer, tpcds.customer_address, tpcds.store
WHERE d_date_sk = ss_sold_date_sk
  AND ss_item_sk = i_item_sk
  AND i_manager_id = 8
  AND d_moy = 11
  AND d_year = 1998
  AND ss_customer_sk = c_customer_sk
  AND c_current_addr_sk = ca_address_sk
  AND substr(ca_zip, 1, 5) <> substr(s_zip, 1, 5)
  AND ss_store_sk = s_store_sk
GROUP BY i_brand, i_brand_id, i_manufact_id, i_manufact;

-- @id: tpcds_009
-- TPC-DS q43: one column per weekday; d_day_name only selects the rows
INSERT OVERWRITE TABLE mart.store_weekday_sales
SELECT s_store_name,
       s_store_id,
       sum(CASE WHEN d_day_name = 'Sunday' THEN ss_sales_price ELSE NULL END) sun_sales,
       sum(CASE WHEN d_day_name = 'Monday' THEN ss_sales_price ELSE NULL END) mon_sales,
       sum(CASE WHEN d_day_name = 'Tuesday' THEN ss_sales_price ELSE NULL END) tue_sales,
       sum(CASE WHEN d_day_name = 'Wednesday' THEN ss_sales_price ELSE NULL END) wed_sales,
       sum(CASE WHEN d_day_name = 'Thursday' THEN ss_sales_price ELSE NULL END) thu_sales,
       sum(CASE WHEN d_day_name = 'Friday' THEN ss_sales_price ELSE NULL END) fri_sales,
       sum(CASE WHEN d_day_name = 'Saturday' THEN ss_sales_price ELSE NULL END) sat_sales
FROM tpcds.date_dim, tpcds.store_sales, tpcds.store
WHERE d_date_sk = ss_sold_date_sk
  AND s_store_sk = ss_store_sk
  AND s_gmt_offset = -5
  AND d_year = 2000
GROUP BY s_store_name, s_store_id;

-- @id: tpcds_010
-- TPC-DS q42
INSERT INTO mart.category_month_sales
SELECT dt.d_year, item.i_category_id, item.i_category, sum(ss_ext_sales_price)
FROM tpcds.date_dim dt, tpcds.store_sales, tpcds.item
WHERE dt.d_date_sk = store_sales.ss_sold_date_sk
  AND store_sales.ss_item_sk = item.i_item_sk
  AND item.i_manager_id = 1
  AND dt.d_moy = 11
  AND dt.d_year = 2000
GROUP BY dt.d_year, item.i_category_id, item.i_category;

-- @id: tpcds_011
-- TPC-DS q5: sales and returns of three channels, rolled up
INSERT OVERWRITE TABLE mart.channel_profit_report PARTITION (period = '2000-08')
WITH ssr AS (
  SELECT s_store_id,
         sum(sales_price) AS sales,
         sum(profit) AS profit,
         sum(return_amt) AS returns,
         sum(net_loss) AS profit_loss
  FROM (
    SELECT ss_store_sk AS store_sk, ss_sold_date_sk AS date_sk, ss_ext_sales_price AS sales_price,
           ss_net_profit AS profit, CAST(0 AS DECIMAL(7,2)) AS return_amt, CAST(0 AS DECIMAL(7,2)) AS net_loss
    FROM tpcds.store_sales
    UNION ALL
    SELECT sr_store_sk AS store_sk, sr_returned_date_sk AS date_sk, CAST(0 AS DECIMAL(7,2)) AS sales_price,
           CAST(0 AS DECIMAL(7,2)) AS profit, sr_return_amt AS return_amt, sr_net_loss AS net_loss
    FROM tpcds.store_returns
  ) salesreturns, tpcds.date_dim, tpcds.store
  WHERE date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND DATE '2000-09-06'
    AND store_sk = s_store_sk
  GROUP BY s_store_id
),
csr AS (
  SELECT cp_catalog_page_id,
         sum(sales_price) AS sales,
         sum(profit) AS profit,
         sum(return_amt) AS returns,
         sum(net_loss) AS profit_loss
  FROM (
    SELECT cs_catalog_page_sk AS page_sk, cs_sold_date_sk AS date_sk, cs_ext_sales_price AS sales_price,
           cs_net_profit AS profit, CAST(0 AS DECIMAL(7,2)) AS return_amt, CAST(0 AS DECIMAL(7,2)) AS net_loss
    FROM tpcds.catalog_sales
    UNION ALL
    SELECT cr_catalog_page_sk AS page_sk, cr_returned_date_sk AS date_sk, CAST(0 AS DECIMAL(7,2)) AS sales_price,
           CAST(0 AS DECIMAL(7,2)) AS profit, cr_return_amount AS return_amt, cr_net_loss AS net_loss
    FROM tpcds.catalog_returns
  ) salesreturns, tpcds.date_dim, tpcds.catalog_page
  WHERE date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND DATE '2000-09-06'
    AND page_sk = cp_catalog_page_sk
  GROUP BY cp_catalog_page_id
),
wsr AS (
  SELECT web_site_id,
         sum(sales_price) AS sales,
         sum(profit) AS profit,
         sum(return_amt) AS returns,
         sum(net_loss) AS profit_loss
  FROM (
    SELECT ws_web_site_sk AS wsr_web_site_sk, ws_sold_date_sk AS date_sk, ws_ext_sales_price AS sales_price,
           ws_net_profit AS profit, CAST(0 AS DECIMAL(7,2)) AS return_amt, CAST(0 AS DECIMAL(7,2)) AS net_loss
    FROM tpcds.web_sales
    UNION ALL
    SELECT ws.ws_web_site_sk AS wsr_web_site_sk, wr.wr_returned_date_sk AS date_sk,
           CAST(0 AS DECIMAL(7,2)) AS sales_price, CAST(0 AS DECIMAL(7,2)) AS profit,
           wr.wr_return_amt AS return_amt, wr.wr_net_loss AS net_loss
    FROM tpcds.web_returns wr
    LEFT OUTER JOIN tpcds.web_sales ws
      ON wr.wr_item_sk = ws.ws_item_sk AND wr.wr_order_number = ws.ws_order_number
  ) salesreturns, tpcds.date_dim, tpcds.web_site
  WHERE date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND DATE '2000-09-06'
    AND wsr_web_site_sk = web_site_sk
  GROUP BY web_site_id
)
SELECT channel, id, sum(sales) AS sales, sum(returns) AS returns, sum(profit) AS profit
FROM (
  SELECT 'store channel' AS channel, concat('store', s_store_id) AS id, sales, returns,
         (profit - profit_loss) AS profit
  FROM ssr
  UNION ALL
  SELECT 'catalog channel' AS channel, concat('catalog_page', cp_catalog_page_id) AS id, sales, returns,
         (profit - profit_loss) AS profit
  FROM csr
  UNION ALL
  SELECT 'web channel' AS channel, concat('web_site', web_site_id) AS id, sales, returns,
         (profit - profit_loss) AS profit
  FROM wsr
) x
GROUP BY ROLLUP (channel, id);

-- @id: tpcds_012
-- is_weekend is decided by a CASE condition only: no direct source
CREATE TABLE mart.dim_date USING parquet AS
SELECT d_date_sk AS date_sk,
       d_date AS calendar_date,
       d_year AS year,
       d_moy AS month,
       d_qoy AS quarter,
       d_day_name AS day_name,
       CASE WHEN d_weekend = 'Y' THEN true ELSE false END AS is_weekend
FROM tpcds.date_dim
WHERE d_year BETWEEN 1998 AND 2003;

-- @id: tpcds_013
-- SCD1 upsert of the customer dimension
MERGE INTO mart.dim_customer AS t
USING (
  SELECT c.c_customer_sk, c.c_customer_id, c.c_first_name, c.c_last_name, c.c_email_address,
         ca.ca_state, ca.ca_country
  FROM tpcds.customer c
  JOIN tpcds.customer_address ca ON c.c_current_addr_sk = ca.ca_address_sk
) AS s
ON t.customer_sk = s.c_customer_sk
WHEN MATCHED THEN UPDATE SET
  t.first_name = s.c_first_name,
  t.last_name = s.c_last_name,
  t.email = s.c_email_address,
  t.state = s.ca_state,
  t.country = s.ca_country
WHEN NOT MATCHED THEN INSERT (customer_sk, customer_id, first_name, last_name, email, state, country)
  VALUES (s.c_customer_sk, s.c_customer_id, s.c_first_name, s.c_last_name, s.c_email_address,
          s.ca_state, s.ca_country);

-- @id: tpcds_014
-- TPC-DS q22: average inventory rolled up by product hierarchy
INSERT OVERWRITE TABLE mart.inventory_quantity_rollup
SELECT i_product_name, i_brand, i_class, i_category, avg(inv_quantity_on_hand) qoh
FROM tpcds.inventory, tpcds.date_dim, tpcds.item
WHERE inv_date_sk = d_date_sk
  AND inv_item_sk = i_item_sk
  AND d_month_seq BETWEEN 1200 AND 1211
GROUP BY ROLLUP (i_product_name, i_brand, i_class, i_category);

-- @id: tpcds_015
-- TPC-DS q12: revenue ratio inside the item class
INSERT OVERWRITE TABLE mart.web_item_revenue_ratio
SELECT i_item_id,
       i_item_desc,
       i_category,
       i_class,
       i_current_price,
       sum(ws_ext_sales_price) AS itemrevenue,
       sum(ws_ext_sales_price) * 100 / sum(sum(ws_ext_sales_price)) OVER (PARTITION BY i_class) AS revenueratio
FROM tpcds.web_sales, tpcds.item, tpcds.date_dim
WHERE ws_item_sk = i_item_sk
  AND i_category IN ('Sports', 'Books', 'Home')
  AND ws_sold_date_sk = d_date_sk
  AND d_date BETWEEN DATE '1999-02-22' AND DATE '1999-03-24'
GROUP BY i_item_id, i_item_desc, i_category, i_class, i_current_price;

-- @id: tpcds_016
-- TPC-DS q98 as a table
CREATE TABLE mart.store_item_revenue_ratio STORED AS ORC AS
SELECT i_item_id,
       i_item_desc,
       i_category,
       i_class,
       i_current_price,
       sum(ss_ext_sales_price) AS itemrevenue,
       sum(ss_ext_sales_price) * 100 / sum(sum(ss_ext_sales_price)) OVER (PARTITION BY i_class) AS revenueratio
FROM tpcds.store_sales, tpcds.item, tpcds.date_dim
WHERE ss_item_sk = i_item_sk
  AND i_category IN ('Sports', 'Books', 'Home')
  AND ss_sold_date_sk = d_date_sk
  AND d_date BETWEEN DATE '1999-02-22' AND DATE '1999-03-24'
GROUP BY i_item_id, i_item_desc, i_category, i_class, i_current_price
ORDER BY i_category, i_class, i_item_id, i_item_desc, revenueratio;

-- @id: tpcds_017
-- TPC-DS q20 as a view
CREATE OR REPLACE VIEW mart.v_catalog_item_revenue_ratio AS
SELECT i_item_id,
       i_item_desc,
       i_category,
       i_class,
       i_current_price,
       sum(cs_ext_sales_price) AS itemrevenue,
       sum(cs_ext_sales_price) * 100 / sum(sum(cs_ext_sales_price)) OVER (PARTITION BY i_class) AS revenueratio
FROM tpcds.catalog_sales, tpcds.item, tpcds.date_dim
WHERE cs_item_sk = i_item_sk
  AND i_category IN ('Sports', 'Books', 'Home')
  AND cs_sold_date_sk = d_date_sk
  AND d_date BETWEEN DATE '1999-02-22' AND DATE '1999-03-24'
GROUP BY i_item_id, i_item_desc, i_category, i_class, i_current_price;

-- @id: tpcds_018
-- TPC-DS q27 with grouping()
INSERT OVERWRITE TABLE mart.state_item_demo_averages
SELECT i_item_id,
       s_state,
       grouping(s_state) g_state,
       avg(ss_quantity) agg1,
       avg(ss_list_price) agg2,
       avg(ss_coupon_amt) agg3,
       avg(ss_sales_price) agg4
FROM tpcds.store_sales, tpcds.customer_demographics, tpcds.date_dim, tpcds.store, tpcds.item
WHERE ss_sold_date_sk = d_date_sk
  AND ss_item_sk = i_item_sk
  AND ss_store_sk = s_store_sk
  AND ss_cdemo_sk = cd_demo_sk
  AND cd_gender = 'M'
  AND cd_marital_status = 'S'
  AND cd_education_status = 'College'
  AND d_year = 2002
  AND s_state IN ('TN', 'AL', 'SD')
GROUP BY ROLLUP (i_item_id, s_state);

-- @id: tpcds_019
-- TPC-DS q34
INSERT INTO mart.frequent_shoppers
SELECT c_last_name, c_first_name, c_salutation, c_preferred_cust_flag, ss_ticket_number, cnt
FROM (
  SELECT ss_ticket_number, ss_customer_sk, count(*) cnt
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.store, tpcds.household_demographics
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_store_sk = store.s_store_sk
    AND store_sales.ss_hdemo_sk = household_demographics.hd_demo_sk
    AND (date_dim.d_dom BETWEEN 1 AND 3 OR date_dim.d_dom BETWEEN 25 AND 28)
    AND (household_demographics.hd_buy_potential = '>10000' OR household_demographics.hd_buy_potential = 'Unknown')
    AND household_demographics.hd_vehicle_count > 0
    AND date_dim.d_year IN (1999, 2000, 2001)
    AND store.s_county IN ('Williamson County', 'Franklin Parish', 'Bronx County', 'Orange County')
  GROUP BY ss_ticket_number, ss_customer_sk
) dn, tpcds.customer
WHERE ss_customer_sk = c_customer_sk
  AND cnt BETWEEN 15 AND 20;

-- @id: tpcds_020
-- TPC-DS q6: scalar subqueries appear only in the WHERE clause
INSERT OVERWRITE TABLE mart.state_high_price_buyers
SELECT a.ca_state state, count(*) cnt
FROM tpcds.customer_address a, tpcds.customer c, tpcds.store_sales s, tpcds.date_dim d, tpcds.item i
WHERE a.ca_address_sk = c.c_current_addr_sk
  AND c.c_customer_sk = s.ss_customer_sk
  AND s.ss_sold_date_sk = d.d_date_sk
  AND s.ss_item_sk = i.i_item_sk
  AND d.d_month_seq = (SELECT DISTINCT d_month_seq FROM tpcds.date_dim WHERE d_year = 2001 AND d_moy = 1)
  AND i.i_current_price > 1.2 * (SELECT avg(j.i_current_price) FROM tpcds.item j WHERE j.i_category = i.i_category)
GROUP BY a.ca_state
HAVING count(*) >= 10;

-- @id: tpcds_021
-- TPC-DS q1
INSERT INTO mart.high_return_customers
WITH customer_total_return AS (
  SELECT sr_customer_sk AS ctr_customer_sk,
         sr_store_sk AS ctr_store_sk,
         sum(sr_return_amt) AS ctr_total_return
  FROM tpcds.store_returns, tpcds.date_dim
  WHERE sr_returned_date_sk = d_date_sk AND d_year = 2000
  GROUP BY sr_customer_sk, sr_store_sk
)
SELECT c_customer_id, ctr1.ctr_total_return
FROM customer_total_return ctr1, tpcds.store, tpcds.customer
WHERE ctr1.ctr_total_return > (
        SELECT avg(ctr_total_return) * 1.2
        FROM customer_total_return ctr2
        WHERE ctr1.ctr_store_sk = ctr2.ctr_store_sk)
  AND s_store_sk = ctr1.ctr_store_sk
  AND s_state = 'TN'
  AND ctr1.ctr_customer_sk = c_customer_sk;

-- @id: tpcds_022
-- TPC-DS q2: week-over-week ratio of web and catalog sales
INSERT OVERWRITE TABLE mart.weekly_sales_ratio
WITH wscs AS (
  SELECT sold_date_sk, sales_price
  FROM (SELECT ws_sold_date_sk sold_date_sk, ws_ext_sales_price sales_price FROM tpcds.web_sales
        UNION ALL
        SELECT cs_sold_date_sk sold_date_sk, cs_ext_sales_price sales_price FROM tpcds.catalog_sales) x
),
wswscs AS (
  SELECT d_week_seq,
         sum(CASE WHEN d_day_name = 'Sunday' THEN sales_price ELSE NULL END) sun_sales,
         sum(CASE WHEN d_day_name = 'Monday' THEN sales_price ELSE NULL END) mon_sales,
         sum(CASE WHEN d_day_name = 'Saturday' THEN sales_price ELSE NULL END) sat_sales
  FROM wscs, tpcds.date_dim
  WHERE d_date_sk = sold_date_sk
  GROUP BY d_week_seq
)
SELECT y.d_week_seq1,
       round(y.sun_sales1 / z.sun_sales2, 2),
       round(y.mon_sales1 / z.mon_sales2, 2),
       round(y.sat_sales1 / z.sat_sales2, 2)
FROM (SELECT wswscs.d_week_seq d_week_seq1, sun_sales sun_sales1, mon_sales mon_sales1, sat_sales sat_sales1
      FROM wswscs, tpcds.date_dim
      WHERE date_dim.d_week_seq = wswscs.d_week_seq AND d_year = 2001) y,
     (SELECT wswscs.d_week_seq d_week_seq2, sun_sales sun_sales2, mon_sales mon_sales2, sat_sales sat_sales2
      FROM wswscs, tpcds.date_dim
      WHERE date_dim.d_week_seq = wswscs.d_week_seq AND d_year = 2002) z
WHERE d_week_seq1 = d_week_seq2 - 53;

-- @id: tpcds_023
-- TPC-DS q11: only the customer's name columns reach the output
CREATE TABLE mart.customer_growth_web_vs_store STORED AS PARQUET AS
WITH year_total AS (
  SELECT c_customer_id customer_id,
         c_first_name customer_first_name,
         c_last_name customer_last_name,
         c_preferred_cust_flag customer_preferred_cust_flag,
         d_year dyear,
         sum(ss_ext_list_price - ss_ext_discount_amt) year_total,
         's' sale_type
  FROM tpcds.customer, tpcds.store_sales, tpcds.date_dim
  WHERE c_customer_sk = ss_customer_sk AND ss_sold_date_sk = d_date_sk
  GROUP BY c_customer_id, c_first_name, c_last_name, c_preferred_cust_flag, d_year
  UNION ALL
  SELECT c_customer_id, c_first_name, c_last_name, c_preferred_cust_flag, d_year,
         sum(ws_ext_list_price - ws_ext_discount_amt), 'w'
  FROM tpcds.customer, tpcds.web_sales, tpcds.date_dim
  WHERE c_customer_sk = ws_bill_customer_sk AND ws_sold_date_sk = d_date_sk
  GROUP BY c_customer_id, c_first_name, c_last_name, c_preferred_cust_flag, d_year
)
SELECT t_s_secyear.customer_id,
       t_s_secyear.customer_first_name,
       t_s_secyear.customer_last_name,
       t_s_secyear.customer_preferred_cust_flag
FROM year_total t_s_firstyear, year_total t_s_secyear, year_total t_w_firstyear, year_total t_w_secyear
WHERE t_s_secyear.customer_id = t_s_firstyear.customer_id
  AND t_s_firstyear.customer_id = t_w_secyear.customer_id
  AND t_s_firstyear.customer_id = t_w_firstyear.customer_id
  AND t_s_firstyear.sale_type = 's'
  AND t_w_firstyear.sale_type = 'w'
  AND t_s_secyear.sale_type = 's'
  AND t_w_secyear.sale_type = 'w'
  AND t_s_firstyear.dyear = 2001
  AND t_s_secyear.dyear = 2002
  AND t_w_firstyear.dyear = 2001
  AND t_w_secyear.dyear = 2002
  AND t_s_firstyear.year_total > 0
  AND t_w_firstyear.year_total > 0
  AND CASE WHEN t_w_firstyear.year_total > 0 THEN t_w_secyear.year_total / t_w_firstyear.year_total ELSE 0.0 END
      > CASE WHEN t_s_firstyear.year_total > 0 THEN t_s_secyear.year_total / t_s_firstyear.year_total ELSE 0.0 END;

-- @id: tpcds_024
-- TPC-DS q46: the bought-city comes from a derived table, the current city from the customer
INSERT OVERWRITE TABLE mart.out_of_town_shoppers
SELECT c_last_name, c_first_name, ca_city, bought_city, ss_ticket_number, amt, profit
FROM (
  SELECT ss_ticket_number, ss_customer_sk, ca_city bought_city,
         sum(ss_coupon_amt) amt, sum(ss_net_profit) profit
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.store, tpcds.household_demographics, tpcds.customer_address
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_store_sk = store.s_store_sk
    AND store_sales.ss_hdemo_sk = household_demographics.hd_demo_sk
    AND store_sales.ss_addr_sk = customer_address.ca_address_sk
    AND (household_demographics.hd_dep_count = 4 OR household_demographics.hd_vehicle_count = 3)
    AND date_dim.d_dow IN (6, 0)
    AND date_dim.d_year IN (1999, 2000, 2001)
    AND store.s_city IN ('Fairview', 'Midway')
  GROUP BY ss_ticket_number, ss_customer_sk, ss_addr_sk, ca_city
) dn, tpcds.customer, tpcds.customer_address current_addr
WHERE ss_customer_sk = c_customer_sk
  AND customer.c_current_addr_sk = current_addr.ca_address_sk
  AND current_addr.ca_city <> bought_city;

-- @id: tpcds_025
-- TPC-DS q52 with an explicit column list in another order than the table
INSERT INTO mart.brand_month_sales (brand_id, brand, d_year, ext_price)
SELECT item.i_brand_id, item.i_brand, dt.d_year, sum(ss_ext_sales_price)
FROM tpcds.date_dim dt, tpcds.store_sales, tpcds.item
WHERE dt.d_date_sk = store_sales.ss_sold_date_sk
  AND store_sales.ss_item_sk = item.i_item_sk
  AND item.i_manager_id = 1
  AND dt.d_moy = 11
  AND dt.d_year = 2000
GROUP BY dt.d_year, item.i_brand, item.i_brand_id;

-- @id: tpcds_026
-- TPC-DS q55
INSERT INTO mart.manager_brand_revenue
SELECT i_brand_id brand_id, i_brand brand, sum(ss_ext_sales_price) ext_price
FROM tpcds.date_dim, tpcds.store_sales, tpcds.item
WHERE d_date_sk = ss_sold_date_sk
  AND ss_item_sk = i_item_sk
  AND i_manager_id = 28
  AND d_moy = 11
  AND d_year = 1999
GROUP BY i_brand, i_brand_id;

-- @id: tpcds_027
-- TPC-DS q53: quarterly sales against the manufacturer's average
INSERT OVERWRITE TABLE mart.manufacturer_quarterly_sales
SELECT *
FROM (
  SELECT i_manufact_id,
         sum(ss_sales_price) sum_sales,
         avg(sum(ss_sales_price)) OVER (PARTITION BY i_manufact_id) avg_quarterly_sales
  FROM tpcds.item, tpcds.store_sales, tpcds.date_dim, tpcds.store
  WHERE ss_item_sk = i_item_sk
    AND ss_sold_date_sk = d_date_sk
    AND ss_store_sk = s_store_sk
    AND d_month_seq IN (1200, 1201, 1202, 1203, 1204, 1205, 1206, 1207, 1208, 1209, 1210, 1211)
    AND ((i_category IN ('Books', 'Children', 'Electronics') AND i_class IN ('personal', 'portable', 'reference'))
      OR (i_category IN ('Women', 'Music', 'Men') AND i_class IN ('accessories', 'classical', 'fragrances')))
  GROUP BY i_manufact_id, d_qoy
) tmp1
WHERE CASE WHEN avg_quarterly_sales > 0
           THEN abs(sum_sales - avg_quarterly_sales) / avg_quarterly_sales
           ELSE NULL END > 0.1;

-- @id: tpcds_028
-- TPC-DS q89
INSERT OVERWRITE TABLE mart.monthly_sales_deviation
SELECT *
FROM (
  SELECT i_category, i_class, i_brand, s_store_name, s_company_name, d_moy,
         sum(ss_sales_price) sum_sales,
         avg(sum(ss_sales_price)) OVER (PARTITION BY i_category, i_brand, s_store_name, s_company_name) avg_monthly_sales
  FROM tpcds.item, tpcds.store_sales, tpcds.date_dim, tpcds.store
  WHERE ss_item_sk = i_item_sk
    AND ss_sold_date_sk = d_date_sk
    AND ss_store_sk = s_store_sk
    AND d_year IN (1999)
    AND ((i_category IN ('Books', 'Electronics', 'Sports') AND i_class IN ('computers', 'stereo', 'football'))
      OR (i_category IN ('Men', 'Jewelry', 'Women') AND i_class IN ('shirts', 'birdal', 'dresses')))
  GROUP BY i_category, i_class, i_brand, s_store_name, s_company_name, d_moy
) tmp1
WHERE CASE WHEN (avg_monthly_sales <> 0)
           THEN (abs(sum_sales - avg_monthly_sales) / avg_monthly_sales)
           ELSE NULL END > 0.1
ORDER BY sum_sales - avg_monthly_sales, s_store_name
LIMIT 100;

-- @id: tpcds_029
-- TPC-DS q36: gross margin ranked inside each hierarchy level
INSERT OVERWRITE TABLE mart.gross_margin_rank
SELECT sum(ss_net_profit) / sum(ss_ext_sales_price) AS gross_margin,
       i_category,
       i_class,
       grouping(i_category) + grouping(i_class) AS lochierarchy,
       rank() OVER (
         PARTITION BY grouping(i_category) + grouping(i_class),
                      CASE WHEN grouping(i_class) = 0 THEN i_category END
         ORDER BY sum(ss_net_profit) / sum(ss_ext_sales_price) ASC) AS rank_within_parent
FROM tpcds.store_sales, tpcds.date_dim d1, tpcds.item, tpcds.store
WHERE d1.d_year = 2001
  AND d1.d_date_sk = ss_sold_date_sk
  AND i_item_sk = ss_item_sk
  AND s_store_sk = ss_store_sk
  AND s_state IN ('TN', 'GA', 'AL', 'SC')
GROUP BY ROLLUP (i_category, i_class);

-- @id: tpcds_030
-- TPC-DS q47: monthly sales next to the previous and next month
INSERT OVERWRITE TABLE mart.store_brand_monthly_trend PARTITION (d_year = 1999)
WITH v1 AS (
  SELECT i_category, i_brand, s_store_name, s_company_name, d_year, d_moy,
         sum(ss_sales_price) sum_sales,
         avg(sum(ss_sales_price)) OVER (PARTITION BY i_category, i_brand, s_store_name, s_company_name, d_year)
           avg_monthly_sales,
         rank() OVER (PARTITION BY i_category, i_brand, s_store_name, s_company_name ORDER BY d_year, d_moy) rn
  FROM tpcds.item, tpcds.store_sales, tpcds.date_dim, tpcds.store
  WHERE ss_item_sk = i_item_sk
    AND ss_sold_date_sk = d_date_sk
    AND ss_store_sk = s_store_sk
    AND (d_year = 1999 OR (d_year = 1998 AND d_moy = 12) OR (d_year = 2000 AND d_moy = 1))
  GROUP BY i_category, i_brand, s_store_name, s_company_name, d_year, d_moy
),
v2 AS (
  SELECT v1.i_category, v1.i_brand, v1.s_store_name, v1.s_company_name, v1.d_year, v1.d_moy,
         v1.avg_monthly_sales, v1.sum_sales, v1_lag.sum_sales psum, v1_lead.sum_sales nsum
  FROM v1, v1 v1_lag, v1 v1_lead
  WHERE v1.i_category = v1_lag.i_category
    AND v1.i_category = v1_lead.i_category
    AND v1.i_brand = v1_lag.i_brand
    AND v1.i_brand = v1_lead.i_brand
    AND v1.s_store_name = v1_lag.s_store_name
    AND v1.s_store_name = v1_lead.s_store_name
    AND v1.s_company_name = v1_lag.s_company_name
    AND v1.s_company_name = v1_lead.s_company_name
    AND v1.rn = v1_lag.rn + 1
    AND v1.rn = v1_lead.rn - 1
)
SELECT i_category, i_brand, s_store_name, s_company_name, d_moy, avg_monthly_sales, sum_sales, psum, nsum
FROM v2
WHERE d_year = 1999
  AND avg_monthly_sales > 0
  AND CASE WHEN avg_monthly_sales > 0 THEN abs(sum_sales - avg_monthly_sales) / avg_monthly_sales ELSE NULL END > 0.1;

-- @id: tpcds_031
-- TPC-DS q10: EXISTS subqueries only filter
INSERT OVERWRITE TABLE mart.demographics_of_active_customers
SELECT cd_gender,
       cd_marital_status,
       cd_education_status,
       count(*) cnt1,
       cd_purchase_estimate,
       count(*) cnt2,
       cd_credit_rating,
       count(*) cnt3
FROM tpcds.customer c, tpcds.customer_address ca, tpcds.customer_demographics
WHERE c.c_current_addr_sk = ca.ca_address_sk
  AND ca_county IN ('Rush County', 'Toole County', 'Jefferson County', 'Dona Ana County', 'La Porte County')
  AND cd_demo_sk = c.c_current_cdemo_sk
  AND EXISTS (SELECT * FROM tpcds.store_sales, tpcds.date_dim
              WHERE c.c_customer_sk = ss_customer_sk AND ss_sold_date_sk = d_date_sk
                AND d_year = 2002 AND d_moy BETWEEN 1 AND 4)
  AND (EXISTS (SELECT * FROM tpcds.web_sales, tpcds.date_dim
               WHERE c.c_customer_sk = ws_bill_customer_sk AND ws_sold_date_sk = d_date_sk
                 AND d_year = 2002 AND d_moy BETWEEN 1 AND 4)
    OR EXISTS (SELECT * FROM tpcds.catalog_sales, tpcds.date_dim
               WHERE c.c_customer_sk = cs_ship_customer_sk AND cs_sold_date_sk = d_date_sk
                 AND d_year = 2002 AND d_moy BETWEEN 1 AND 4))
GROUP BY cd_gender, cd_marital_status, cd_education_status, cd_purchase_estimate, cd_credit_rating;

-- @id: tpcds_032
-- TPC-DS q13
INSERT INTO mart.store_sales_demo_averages
SELECT avg(ss_quantity), avg(ss_ext_sales_price), avg(ss_ext_wholesale_cost), sum(ss_ext_wholesale_cost)
FROM tpcds.store_sales, tpcds.store, tpcds.customer_demographics, tpcds.household_demographics,
     tpcds.customer_address, tpcds.date_dim
WHERE s_store_sk = ss_store_sk
  AND ss_sold_date_sk = d_date_sk AND d_year = 2001
  AND ((ss_hdemo_sk = hd_demo_sk AND cd_demo_sk = ss_cdemo_sk AND cd_marital_status = 'M'
        AND cd_education_status = 'Advanced Degree' AND ss_sales_price BETWEEN 100.00 AND 150.00
        AND hd_dep_count = 3)
    OR (ss_hdemo_sk = hd_demo_sk AND cd_demo_sk = ss_cdemo_sk AND cd_marital_status = 'S'
        AND cd_education_status = 'College' AND ss_sales_price BETWEEN 50.00 AND 100.00
        AND hd_dep_count = 1))
  AND ((ss_addr_sk = ca_address_sk AND ca_country = 'United States' AND ca_state IN ('TX', 'OH', 'TX')
        AND ss_net_profit BETWEEN 100 AND 200)
    OR (ss_addr_sk = ca_address_sk AND ca_country = 'United States' AND ca_state IN ('OR', 'NM', 'KY')
        AND ss_net_profit BETWEEN 150 AND 300));

-- @id: tpcds_033
-- TPC-DS q15
INSERT OVERWRITE TABLE mart.catalog_sales_by_zip PARTITION (qtr = '2001Q2')
SELECT ca_zip, sum(cs_sales_price)
FROM tpcds.catalog_sales, tpcds.customer, tpcds.customer_address, tpcds.date_dim
WHERE cs_bill_customer_sk = c_customer_sk
  AND c_current_addr_sk = ca_address_sk
  AND (substr(ca_zip, 1, 5) IN ('85669', '86197', '88274', '83405', '86475', '85392', '85460', '80348', '81792')
       OR ca_state IN ('CA', 'WA', 'GA')
       OR cs_sales_price > 500)
  AND cs_sold_date_sk = d_date_sk
  AND d_qoy = 2 AND d_year = 2001
GROUP BY ca_zip;

-- @id: tpcds_034
-- TPC-DS q16
INSERT INTO mart.multi_warehouse_orders
SELECT count(DISTINCT cs_order_number) AS order_count,
       sum(cs_ext_ship_cost) AS total_shipping_cost,
       sum(cs_net_profit) AS total_net_profit
FROM tpcds.catalog_sales cs1, tpcds.date_dim, tpcds.customer_address, tpcds.call_center
WHERE d_date BETWEEN DATE '2002-02-01' AND date_add(DATE '2002-02-01', 60)
  AND cs1.cs_ship_date_sk = d_date_sk
  AND cs1.cs_ship_addr_sk = ca_address_sk
  AND ca_state = 'GA'
  AND cs1.cs_call_center_sk = cc_call_center_sk
  AND cc_county IN ('Williamson County', 'Williamson County', 'Williamson County')
  AND EXISTS (SELECT * FROM tpcds.catalog_sales cs2
              WHERE cs1.cs_order_number = cs2.cs_order_number AND cs1.cs_warehouse_sk <> cs2.cs_warehouse_sk)
  AND NOT EXISTS (SELECT * FROM tpcds.catalog_returns cr1 WHERE cs1.cs_order_number = cr1.cr_order_number);

-- @id: tpcds_035
-- TPC-DS q18
INSERT OVERWRITE TABLE mart.catalog_demo_rollup
SELECT i_item_id, ca_country, ca_state, ca_county,
       avg(CAST(cs_quantity AS DECIMAL(12,2))) agg1,
       avg(CAST(cs_list_price AS DECIMAL(12,2))) agg2,
       avg(CAST(cs_coupon_amt AS DECIMAL(12,2))) agg3,
       avg(CAST(cs_sales_price AS DECIMAL(12,2))) agg4,
       avg(CAST(cs_net_profit AS DECIMAL(12,2))) agg5,
       avg(CAST(c_birth_year AS DECIMAL(12,2))) agg6,
       avg(CAST(cd1.cd_dep_count AS DECIMAL(12,2))) agg7
FROM tpcds.catalog_sales, tpcds.customer_demographics cd1, tpcds.customer_demographics cd2,
     tpcds.customer, tpcds.customer_address, tpcds.date_dim, tpcds.item
WHERE cs_sold_date_sk = d_date_sk
  AND cs_item_sk = i_item_sk
  AND cs_bill_cdemo_sk = cd1.cd_demo_sk
  AND cs_bill_customer_sk = c_customer_sk
  AND cd1.cd_gender = 'F'
  AND cd1.cd_education_status = 'Unknown'
  AND c_current_cdemo_sk = cd2.cd_demo_sk
  AND c_current_addr_sk = ca_address_sk
  AND c_birth_month IN (1, 6, 8, 9, 12, 2)
  AND d_year = 1998
  AND ca_state IN ('MS', 'IN', 'ND', 'OK', 'NM', 'VA', 'MS')
GROUP BY ROLLUP (i_item_id, ca_country, ca_state, ca_county);

-- @id: tpcds_036
-- TPC-DS q25: store sale, store return and later catalog purchase of the same item
INSERT OVERWRITE TABLE mart.store_return_rebuy_profit
SELECT i_item_id, i_item_desc, s_store_id, s_store_name,
       sum(ss_net_profit) AS store_sales_profit,
       sum(sr_net_loss) AS store_returns_loss,
       sum(cs_net_profit) AS catalog_sales_profit
FROM tpcds.store_sales, tpcds.store_returns, tpcds.catalog_sales,
     tpcds.date_dim d1, tpcds.date_dim d2, tpcds.date_dim d3, tpcds.store, tpcds.item
WHERE d1.d_moy = 4 AND d1.d_year = 2001
  AND d1.d_date_sk = ss_sold_date_sk
  AND i_item_sk = ss_item_sk
  AND s_store_sk = ss_store_sk
  AND ss_customer_sk = sr_customer_sk
  AND ss_item_sk = sr_item_sk
  AND ss_ticket_number = sr_ticket_number
  AND sr_returned_date_sk = d2.d_date_sk
  AND d2.d_moy BETWEEN 4 AND 10 AND d2.d_year = 2001
  AND sr_customer_sk = cs_bill_customer_sk
  AND sr_item_sk = cs_item_sk
  AND cs_sold_date_sk = d3.d_date_sk
  AND d3.d_moy BETWEEN 4 AND 10 AND d3.d_year = 2001
GROUP BY i_item_id, i_item_desc, s_store_id, s_store_name;

-- @id: tpcds_037
-- TPC-DS q26
INSERT INTO mart.catalog_promo_item_averages
SELECT i_item_id,
       avg(cs_quantity) agg1,
       avg(cs_list_price) agg2,
       avg(cs_coupon_amt) agg3,
       avg(cs_sales_price) agg4
FROM tpcds.catalog_sales, tpcds.customer_demographics, tpcds.date_dim, tpcds.item, tpcds.promotion
WHERE cs_sold_date_sk = d_date_sk
  AND cs_item_sk = i_item_sk
  AND cs_bill_cdemo_sk = cd_demo_sk
  AND cs_promo_sk = p_promo_sk
  AND cd_gender = 'M' AND cd_marital_status = 'S' AND cd_education_status = 'College'
  AND (p_channel_email = 'N' OR p_channel_event = 'N')
  AND d_year = 2000
GROUP BY i_item_id;

-- @id: tpcds_038
-- TPC-DS q29
INSERT OVERWRITE TABLE mart.store_return_rebuy_quantity
SELECT i_item_id, i_item_desc, s_store_id, s_store_name,
       sum(ss_quantity) AS store_sales_quantity,
       sum(sr_return_quantity) AS store_returns_quantity,
       sum(cs_quantity) AS catalog_sales_quantity
FROM tpcds.store_sales, tpcds.store_returns, tpcds.catalog_sales,
     tpcds.date_dim d1, tpcds.date_dim d2, tpcds.date_dim d3, tpcds.store, tpcds.item
WHERE d1.d_moy = 9 AND d1.d_year = 1999
  AND d1.d_date_sk = ss_sold_date_sk
  AND i_item_sk = ss_item_sk
  AND s_store_sk = ss_store_sk
  AND ss_customer_sk = sr_customer_sk
  AND ss_item_sk = sr_item_sk
  AND ss_ticket_number = sr_ticket_number
  AND sr_returned_date_sk = d2.d_date_sk
  AND d2.d_moy BETWEEN 9 AND 12 AND d2.d_year = 1999
  AND sr_customer_sk = cs_bill_customer_sk
  AND sr_item_sk = cs_item_sk
  AND cs_sold_date_sk = d3.d_date_sk
  AND d3.d_year IN (1999, 2000, 2001)
GROUP BY i_item_id, i_item_desc, s_store_id, s_store_name;

-- @id: tpcds_039
-- TPC-DS q32
INSERT INTO mart.excess_discount
SELECT sum(cs_ext_discount_amt) AS excess_discount_amount
FROM tpcds.catalog_sales, tpcds.item, tpcds.date_dim
WHERE i_manufact_id = 977
  AND i_item_sk = cs_item_sk
  AND d_date BETWEEN DATE '2000-01-27' AND date_add(DATE '2000-01-27', 90)
  AND d_date_sk = cs_sold_date_sk
  AND cs_ext_discount_amt > (
        SELECT 1.3 * avg(cs_ext_discount_amt)
        FROM tpcds.catalog_sales, tpcds.date_dim
        WHERE cs_item_sk = i_item_sk
          AND d_date BETWEEN DATE '2000-01-27' AND date_add(DATE '2000-01-27', 90)
          AND d_date_sk = cs_sold_date_sk);

-- @id: tpcds_040
-- TPC-DS q37
INSERT OVERWRITE TABLE mart.items_in_stock
SELECT i_item_id, i_item_desc, i_current_price
FROM tpcds.item, tpcds.inventory, tpcds.date_dim, tpcds.catalog_sales
WHERE i_current_price BETWEEN 68 AND 68 + 30
  AND inv_item_sk = i_item_sk
  AND d_date_sk = inv_date_sk
  AND d_date BETWEEN DATE '2000-02-01' AND date_add(DATE '2000-02-01', 60)
  AND i_manufact_id IN (677, 940, 694, 808)
  AND inv_quantity_on_hand BETWEEN 100 AND 500
  AND cs_item_sk = i_item_sk
GROUP BY i_item_id, i_item_desc, i_current_price;

-- @id: tpcds_041
-- TPC-DS q38: the only output is a count
INSERT INTO mart.cross_channel_customer_count
SELECT count(*) AS hot_customers
FROM (
  SELECT DISTINCT c_last_name, c_first_name, d_date
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.customer
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_customer_sk = customer.c_customer_sk
    AND d_month_seq BETWEEN 1200 AND 1200 + 11
  INTERSECT
  SELECT DISTINCT c_last_name, c_first_name, d_date
  FROM tpcds.catalog_sales, tpcds.date_dim, tpcds.customer
  WHERE catalog_sales.cs_sold_date_sk = date_dim.d_date_sk
    AND catalog_sales.cs_bill_customer_sk = customer.c_customer_sk
    AND d_month_seq BETWEEN 1200 AND 1200 + 11
  INTERSECT
  SELECT DISTINCT c_last_name, c_first_name, d_date
  FROM tpcds.web_sales, tpcds.date_dim, tpcds.customer
  WHERE web_sales.ws_sold_date_sk = date_dim.d_date_sk
    AND web_sales.ws_bill_customer_sk = customer.c_customer_sk
    AND d_month_seq BETWEEN 1200 AND 1200 + 11
) hot_cust;

-- @id: tpcds_042
-- TPC-DS q40: refunds come from a LEFT JOIN
INSERT OVERWRITE TABLE mart.sales_around_price_change
SELECT w_state,
       i_item_id,
       sum(CASE WHEN CAST(d_date AS DATE) < CAST('2000-03-11' AS DATE)
                THEN cs_sales_price - coalesce(cr_refunded_cash, 0) ELSE 0 END) AS sales_before,
       sum(CASE WHEN CAST(d_date AS DATE) >= CAST('2000-03-11' AS DATE)
                THEN cs_sales_price - coalesce(cr_refunded_cash, 0) ELSE 0 END) AS sales_after
FROM tpcds.catalog_sales
LEFT OUTER JOIN tpcds.catalog_returns
  ON (cs_order_number = cr_order_number AND cs_item_sk = cr_item_sk),
  tpcds.warehouse, tpcds.item, tpcds.date_dim
WHERE i_current_price BETWEEN 0.99 AND 1.49
  AND i_item_sk = cs_item_sk
  AND cs_warehouse_sk = w_warehouse_sk
  AND cs_sold_date_sk = d_date_sk
  AND d_date BETWEEN date_sub(DATE '2000-03-11', 30) AND date_add(DATE '2000-03-11', 30)
GROUP BY w_state, i_item_id;

-- @id: tpcds_043
-- TPC-DS q44: best and worst items by rank
INSERT OVERWRITE TABLE mart.best_worst_items
SELECT asceding.rnk, i1.i_product_name best_performing, i2.i_product_name worst_performing
FROM (
  SELECT *
  FROM (SELECT item_sk, rank() OVER (ORDER BY rank_col ASC) rnk
        FROM (SELECT ss_item_sk item_sk, avg(ss_net_profit) rank_col
              FROM tpcds.store_sales ss1
              WHERE ss_store_sk = 4
              GROUP BY ss_item_sk
              HAVING avg(ss_net_profit) > 0.9 * (SELECT avg(ss_net_profit) rank_col
                                                 FROM tpcds.store_sales
                                                 WHERE ss_store_sk = 4 AND ss_addr_sk IS NULL
                                                 GROUP BY ss_store_sk)) v1) v11
  WHERE rnk < 11) asceding,
  (SELECT *
   FROM (SELECT item_sk, rank() OVER (ORDER BY rank_col DESC) rnk
         FROM (SELECT ss_item_sk item_sk, avg(ss_net_profit) rank_col
               FROM tpcds.store_sales ss1
               WHERE ss_store_sk = 4
               GROUP BY ss_item_sk
               HAVING avg(ss_net_profit) > 0.9 * (SELECT avg(ss_net_profit) rank_col
                                                  FROM tpcds.store_sales
                                                  WHERE ss_store_sk = 4 AND ss_addr_sk IS NULL
                                                  GROUP BY ss_store_sk)) v2) v21
   WHERE rnk < 11) descending,
  tpcds.item i1, tpcds.item i2
WHERE asceding.rnk = descending.rnk
  AND i1.i_item_sk = asceding.item_sk
  AND i2.i_item_sk = descending.item_sk
ORDER BY asceding.rnk
LIMIT 100;

-- @id: tpcds_044
-- TPC-DS q45
INSERT OVERWRITE TABLE mart.web_sales_by_zip_city
SELECT ca_zip, ca_city, sum(ws_sales_price)
FROM tpcds.web_sales, tpcds.customer, tpcds.customer_address, tpcds.date_dim, tpcds.item
WHERE ws_bill_customer_sk = c_customer_sk
  AND c_current_addr_sk = ca_address_sk
  AND ws_item_sk = i_item_sk
  AND (substr(ca_zip, 1, 5) IN ('85669', '86197', '88274', '83405', '86475', '85392', '85460', '80348', '81792')
       OR i_item_id IN (SELECT i_item_id FROM tpcds.item WHERE i_item_sk IN (2, 3, 5, 7, 11, 13, 17, 19, 23, 29)))
  AND ws_sold_date_sk = d_date_sk
  AND d_qoy = 2 AND d_year = 2001
GROUP BY ca_zip, ca_city;

-- @id: tpcds_045
-- TPC-DS q48
INSERT INTO mart.store_quantity_total
SELECT sum(ss_quantity)
FROM tpcds.store_sales, tpcds.store, tpcds.customer_demographics, tpcds.customer_address, tpcds.date_dim
WHERE s_store_sk = ss_store_sk
  AND ss_sold_date_sk = d_date_sk AND d_year = 2000
  AND ((cd_demo_sk = ss_cdemo_sk AND cd_marital_status = 'M' AND cd_education_status = '4 yr Degree'
        AND ss_sales_price BETWEEN 100.00 AND 150.00)
    OR (cd_demo_sk = ss_cdemo_sk AND cd_marital_status = 'D' AND cd_education_status = '2 yr Degree'
        AND ss_sales_price BETWEEN 50.00 AND 100.00))
  AND ((ss_addr_sk = ca_address_sk AND ca_country = 'United States' AND ca_state IN ('CO', 'OH', 'TX')
        AND ss_net_profit BETWEEN 0 AND 2000)
    OR (ss_addr_sk = ca_address_sk AND ca_country = 'United States' AND ca_state IN ('OR', 'MN', 'KY')
        AND ss_net_profit BETWEEN 150 AND 3000));

-- @id: tpcds_046
-- TPC-DS q50: the day buckets count rows; their CASE reads dates only as conditions
INSERT OVERWRITE TABLE mart.store_return_latency
SELECT s_store_name, s_company_name, s_street_number, s_city, s_county, s_state, s_zip,
       sum(CASE WHEN (sr_returned_date_sk - ss_sold_date_sk <= 30) THEN 1 ELSE 0 END) AS days_30,
       sum(CASE WHEN (sr_returned_date_sk - ss_sold_date_sk > 30)
                 AND (sr_returned_date_sk - ss_sold_date_sk <= 60) THEN 1 ELSE 0 END) AS days_31_60,
       sum(CASE WHEN (sr_returned_date_sk - ss_sold_date_sk > 60)
                 AND (sr_returned_date_sk - ss_sold_date_sk <= 90) THEN 1 ELSE 0 END) AS days_61_90,
       sum(CASE WHEN (sr_returned_date_sk - ss_sold_date_sk > 90) THEN 1 ELSE 0 END) AS days_over_90
FROM tpcds.store_sales, tpcds.store_returns, tpcds.store, tpcds.date_dim d1, tpcds.date_dim d2
WHERE d2.d_year = 2001
  AND d2.d_moy = 8
  AND ss_ticket_number = sr_ticket_number
  AND ss_item_sk = sr_item_sk
  AND ss_sold_date_sk = d1.d_date_sk
  AND sr_returned_date_sk = d2.d_date_sk
  AND ss_customer_sk = sr_customer_sk
  AND ss_store_sk = s_store_sk
GROUP BY s_store_name, s_company_name, s_street_number, s_city, s_county, s_state, s_zip;

-- @id: tpcds_047
-- TPC-DS q62
INSERT OVERWRITE TABLE mart.web_ship_latency
SELECT substr(w_warehouse_name, 1, 20) AS warehouse_name,
       sm_type,
       web_name,
       sum(CASE WHEN (ws_ship_date_sk - ws_sold_date_sk <= 30) THEN 1 ELSE 0 END) AS days_30,
       sum(CASE WHEN (ws_ship_date_sk - ws_sold_date_sk > 30) AND (ws_ship_date_sk - ws_sold_date_sk <= 60)
                THEN 1 ELSE 0 END) AS days_31_60,
       sum(CASE WHEN (ws_ship_date_sk - ws_sold_date_sk > 60) THEN 1 ELSE 0 END) AS days_over_60
FROM tpcds.web_sales, tpcds.warehouse, tpcds.ship_mode, tpcds.web_site, tpcds.date_dim
WHERE d_month_seq BETWEEN 1200 AND 1200 + 11
  AND ws_ship_date_sk = d_date_sk
  AND ws_warehouse_sk = w_warehouse_sk
  AND ws_ship_mode_sk = sm_ship_mode_sk
  AND ws_web_site_sk = web_site_sk
GROUP BY substr(w_warehouse_name, 1, 20), sm_type, web_name;

-- @id: tpcds_048
-- TPC-DS q65: items selling under 10% of the store's average revenue
INSERT OVERWRITE TABLE mart.low_revenue_items
SELECT s_store_name, i_item_desc, sc.revenue, i_current_price, i_wholesale_cost, i_brand
FROM tpcds.store, tpcds.item,
     (SELECT ss_store_sk, avg(revenue) AS ave
      FROM (SELECT ss_store_sk, ss_item_sk, sum(ss_sales_price) AS revenue
            FROM tpcds.store_sales, tpcds.date_dim
            WHERE ss_sold_date_sk = d_date_sk AND d_month_seq BETWEEN 1176 AND 1176 + 11
            GROUP BY ss_store_sk, ss_item_sk) sa
      GROUP BY ss_store_sk) sb,
     (SELECT ss_store_sk, ss_item_sk, sum(ss_sales_price) AS revenue
      FROM tpcds.store_sales, tpcds.date_dim
      WHERE ss_sold_date_sk = d_date_sk AND d_month_seq BETWEEN 1176 AND 1176 + 11
      GROUP BY ss_store_sk, ss_item_sk) sc
WHERE sb.ss_store_sk = sc.ss_store_sk
  AND sc.revenue <= 0.1 * sb.ave
  AND s_store_sk = sc.ss_store_sk
  AND i_item_sk = sc.ss_item_sk;

-- @id: tpcds_049
-- TPC-DS q68
INSERT OVERWRITE TABLE mart.city_hopper_tickets
SELECT c_last_name, c_first_name, ca_city, bought_city, ss_ticket_number, extended_price, extended_tax, list_price
FROM (
  SELECT ss_ticket_number, ss_customer_sk, ca_city bought_city,
         sum(ss_ext_sales_price) extended_price,
         sum(ss_ext_list_price) list_price,
         sum(ss_ext_tax) extended_tax
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.store, tpcds.household_demographics, tpcds.customer_address
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_store_sk = store.s_store_sk
    AND store_sales.ss_hdemo_sk = household_demographics.hd_demo_sk
    AND store_sales.ss_addr_sk = customer_address.ca_address_sk
    AND date_dim.d_dom BETWEEN 1 AND 2
    AND (household_demographics.hd_dep_count = 4 OR household_demographics.hd_vehicle_count = 3)
    AND date_dim.d_year IN (1999, 2000, 2001)
    AND store.s_city IN ('Midway', 'Fairview')
  GROUP BY ss_ticket_number, ss_customer_sk, ss_addr_sk, ca_city
) dn, tpcds.customer, tpcds.customer_address current_addr
WHERE ss_customer_sk = c_customer_sk
  AND customer.c_current_addr_sk = current_addr.ca_address_sk
  AND current_addr.ca_city <> bought_city
ORDER BY c_last_name, ss_ticket_number
LIMIT 100;

-- @id: tpcds_050
-- TPC-DS q71: sales of three channels at meal times
INSERT OVERWRITE TABLE mart.meal_time_brand_sales
SELECT i_brand_id brand_id, i_brand brand, t_hour, t_minute, sum(ext_price) ext_price
FROM tpcds.item,
     (SELECT ws_ext_sales_price AS ext_price, ws_sold_date_sk AS sold_date_sk, ws_item_sk AS sold_item_sk,
             ws_sold_time_sk AS time_sk
      FROM tpcds.web_sales, tpcds.date_dim
      WHERE d_date_sk = ws_sold_date_sk AND d_moy = 11 AND d_year = 1999
      UNION ALL
      SELECT cs_ext_sales_price AS ext_price, cs_sold_date_sk AS sold_date_sk, cs_item_sk AS sold_item_sk,
             cs_sold_time_sk AS time_sk
      FROM tpcds.catalog_sales, tpcds.date_dim
      WHERE d_date_sk = cs_sold_date_sk AND d_moy = 11 AND d_year = 1999
      UNION ALL
      SELECT ss_ext_sales_price AS ext_price, ss_sold_date_sk AS sold_date_sk, ss_item_sk AS sold_item_sk,
             ss_sold_time_sk AS time_sk
      FROM tpcds.store_sales, tpcds.date_dim
      WHERE d_date_sk = ss_sold_date_sk AND d_moy = 11 AND d_year = 1999) tmp,
     tpcds.time_dim
WHERE sold_item_sk = i_item_sk
  AND i_manager_id = 1
  AND time_sk = t_time_sk
  AND (t_meal_time = 'breakfast' OR t_meal_time = 'dinner')
GROUP BY i_brand, i_brand_id, t_hour, t_minute;

-- @id: tpcds_051
-- TPC-DS q76: rows with a missing key, per channel
INSERT OVERWRITE TABLE mart.null_key_sales
SELECT channel, col_name, d_year, d_qoy, i_category, count(*) sales_cnt, sum(ext_sales_price) sales_amt
FROM (
  SELECT 'store' AS channel, 'ss_store_sk' col_name, d_year, d_qoy, i_category, ss_ext_sales_price ext_sales_price
  FROM tpcds.store_sales, tpcds.item, tpcds.date_dim
  WHERE ss_store_sk IS NULL AND ss_sold_date_sk = d_date_sk AND ss_item_sk = i_item_sk
  UNION ALL
  SELECT 'web' AS channel, 'ws_ship_customer_sk' col_name, d_year, d_qoy, i_category, ws_ext_sales_price ext_sales_price
  FROM tpcds.web_sales, tpcds.item, tpcds.date_dim
  WHERE ws_ship_customer_sk IS NULL AND ws_sold_date_sk = d_date_sk AND ws_item_sk = i_item_sk
  UNION ALL
  SELECT 'catalog' AS channel, 'cs_ship_addr_sk' col_name, d_year, d_qoy, i_category, cs_ext_sales_price ext_sales_price
  FROM tpcds.catalog_sales, tpcds.item, tpcds.date_dim
  WHERE cs_ship_addr_sk IS NULL AND cs_sold_date_sk = d_date_sk AND cs_item_sk = i_item_sk
) foo
GROUP BY channel, col_name, d_year, d_qoy, i_category;

-- @id: tpcds_052
-- TPC-DS q79
INSERT OVERWRITE TABLE mart.monday_shoppers
SELECT c_last_name, c_first_name, substr(s_city, 1, 30) AS city, ss_ticket_number, amt, profit
FROM (
  SELECT ss_ticket_number, ss_customer_sk, store.s_city, sum(ss_coupon_amt) amt, sum(ss_net_profit) profit
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.store, tpcds.household_demographics
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_store_sk = store.s_store_sk
    AND store_sales.ss_hdemo_sk = household_demographics.hd_demo_sk
    AND (household_demographics.hd_dep_count = 6 OR household_demographics.hd_vehicle_count > 2)
    AND date_dim.d_dow = 1
    AND date_dim.d_year IN (1999, 2000, 2001)
    AND store.s_number_employees BETWEEN 200 AND 295
  GROUP BY ss_ticket_number, ss_customer_sk, ss_addr_sk, store.s_city
) ms, tpcds.customer
WHERE ss_customer_sk = c_customer_sk;

-- @id: tpcds_053
-- TPC-DS q84 with Spark's || string concatenation
INSERT OVERWRITE TABLE mart.customers_by_income_band
SELECT c_customer_id AS customer_id,
       coalesce(c_last_name, '') || ', ' || coalesce(c_first_name, '') AS customername
FROM tpcds.customer, tpcds.customer_address, tpcds.customer_demographics,
     tpcds.household_demographics, tpcds.income_band, tpcds.store_returns
WHERE ca_city = 'Edgewood'
  AND c_current_addr_sk = ca_address_sk
  AND ib_lower_bound >= 38128
  AND ib_upper_bound <= 38128 + 50000
  AND ib_income_band_sk = hd_income_band_sk
  AND cd_demo_sk = c_current_cdemo_sk
  AND hd_demo_sk = c_current_hdemo_sk
  AND sr_cdemo_sk = cd_demo_sk;

-- @id: tpcds_054
-- TPC-DS q88 (first half): counts per half hour, cross joined
INSERT INTO mart.morning_traffic
SELECT *
FROM (SELECT count(*) h8_30_to_9
      FROM tpcds.store_sales, tpcds.household_demographics, tpcds.time_dim, tpcds.store
      WHERE ss_sold_time_sk = time_dim.t_time_sk AND ss_hdemo_sk = household_demographics.hd_demo_sk
        AND ss_store_sk = s_store_sk AND time_dim.t_hour = 8 AND time_dim.t_minute >= 30
        AND household_demographics.hd_dep_count = 4 AND store.s_store_name = 'ese') s1,
     (SELECT count(*) h9_to_9_30
      FROM tpcds.store_sales, tpcds.household_demographics, tpcds.time_dim, tpcds.store
      WHERE ss_sold_time_sk = time_dim.t_time_sk AND ss_hdemo_sk = household_demographics.hd_demo_sk
        AND ss_store_sk = s_store_sk AND time_dim.t_hour = 9 AND time_dim.t_minute < 30
        AND household_demographics.hd_dep_count = 4 AND store.s_store_name = 'ese') s2,
     (SELECT count(*) h9_30_to_10
      FROM tpcds.store_sales, tpcds.household_demographics, tpcds.time_dim, tpcds.store
      WHERE ss_sold_time_sk = time_dim.t_time_sk AND ss_hdemo_sk = household_demographics.hd_demo_sk
        AND ss_store_sk = s_store_sk AND time_dim.t_hour = 9 AND time_dim.t_minute >= 30
        AND household_demographics.hd_dep_count = 4 AND store.s_store_name = 'ese') s3;

-- @id: tpcds_055
-- TPC-DS q90
INSERT INTO mart.am_pm_ratio
SELECT CAST(amc AS DECIMAL(15,4)) / CAST(pmc AS DECIMAL(15,4)) am_pm_ratio
FROM (SELECT count(*) amc
      FROM tpcds.web_sales, tpcds.household_demographics, tpcds.time_dim, tpcds.web_page
      WHERE ws_sold_time_sk = time_dim.t_time_sk AND ws_ship_hdemo_sk = household_demographics.hd_demo_sk
        AND ws_web_page_sk = web_page.wp_web_page_sk AND time_dim.t_hour BETWEEN 8 AND 8 + 1
        AND household_demographics.hd_dep_count = 6 AND web_page.wp_char_count BETWEEN 5000 AND 5200) at,
     (SELECT count(*) pmc
      FROM tpcds.web_sales, tpcds.household_demographics, tpcds.time_dim, tpcds.web_page
      WHERE ws_sold_time_sk = time_dim.t_time_sk AND ws_ship_hdemo_sk = household_demographics.hd_demo_sk
        AND ws_web_page_sk = web_page.wp_web_page_sk AND time_dim.t_hour BETWEEN 19 AND 19 + 1
        AND household_demographics.hd_dep_count = 6 AND web_page.wp_char_count BETWEEN 5000 AND 5200) pt;

-- @id: tpcds_056
-- TPC-DS q91
INSERT OVERWRITE TABLE mart.call_center_returns
SELECT cc_call_center_id call_center,
       cc_name call_center_name,
       cc_manager manager,
       sum(cr_net_loss) returns_loss
FROM tpcds.call_center, tpcds.catalog_returns, tpcds.date_dim, tpcds.customer, tpcds.customer_address,
     tpcds.customer_demographics, tpcds.household_demographics
WHERE cr_call_center_sk = cc_call_center_sk
  AND cr_returned_date_sk = d_date_sk
  AND cr_returning_customer_sk = c_customer_sk
  AND cd_demo_sk = c_current_cdemo_sk
  AND hd_demo_sk = c_current_hdemo_sk
  AND ca_address_sk = c_current_addr_sk
  AND d_year = 1998 AND d_moy = 11
  AND ((cd_marital_status = 'M' AND cd_education_status = 'Unknown')
    OR (cd_marital_status = 'W' AND cd_education_status = 'Advanced Degree'))
  AND hd_buy_potential LIKE 'Unknown%'
  AND ca_gmt_offset = -7
GROUP BY cc_call_center_id, cc_name, cc_manager, cd_marital_status, cd_education_status;

-- @id: tpcds_057
-- TPC-DS q93: actual sales net of returns
INSERT OVERWRITE TABLE mart.customer_actual_sales
SELECT ss_customer_sk, sum(act_sales) sumsales
FROM (
  SELECT ss_item_sk, ss_ticket_number, ss_customer_sk,
         CASE WHEN sr_return_quantity IS NOT NULL THEN (ss_quantity - sr_return_quantity) * ss_sales_price
              ELSE (ss_quantity * ss_sales_price) END act_sales
  FROM tpcds.store_sales
  LEFT OUTER JOIN tpcds.store_returns ON (sr_item_sk = ss_item_sk AND sr_ticket_number = ss_ticket_number),
       tpcds.reason
  WHERE sr_reason_sk = r_reason_sk AND r_reason_desc = 'reason 28'
) t
GROUP BY ss_customer_sk;

-- @id: tpcds_058
-- TPC-DS q96
INSERT INTO mart.evening_ticket_count
SELECT count(*)
FROM tpcds.store_sales, tpcds.household_demographics, tpcds.time_dim, tpcds.store
WHERE ss_sold_time_sk = time_dim.t_time_sk
  AND ss_hdemo_sk = household_demographics.hd_demo_sk
  AND ss_store_sk = s_store_sk
  AND time_dim.t_hour = 20
  AND time_dim.t_minute >= 30
  AND household_demographics.hd_dep_count = 7
  AND store.s_store_name = 'ese';

-- @id: tpcds_059
-- TPC-DS q97
INSERT INTO mart.channel_overlap
WITH ssci AS (
  SELECT ss_customer_sk customer_sk, ss_item_sk item_sk
  FROM tpcds.store_sales, tpcds.date_dim
  WHERE ss_sold_date_sk = d_date_sk AND d_month_seq BETWEEN 1200 AND 1200 + 11
  GROUP BY ss_customer_sk, ss_item_sk
),
csci AS (
  SELECT cs_bill_customer_sk customer_sk, cs_item_sk item_sk
  FROM tpcds.catalog_sales, tpcds.date_dim
  WHERE cs_sold_date_sk = d_date_sk AND d_month_seq BETWEEN 1200 AND 1200 + 11
  GROUP BY cs_bill_customer_sk, cs_item_sk
)
SELECT sum(CASE WHEN ssci.customer_sk IS NOT NULL AND csci.customer_sk IS NULL THEN 1 ELSE 0 END) store_only,
       sum(CASE WHEN ssci.customer_sk IS NULL AND csci.customer_sk IS NOT NULL THEN 1 ELSE 0 END) catalog_only,
       sum(CASE WHEN ssci.customer_sk IS NOT NULL AND csci.customer_sk IS NOT NULL THEN 1 ELSE 0 END)
         store_and_catalog
FROM ssci
FULL OUTER JOIN csci ON (ssci.customer_sk = csci.customer_sk AND ssci.item_sk = csci.item_sk);

-- @id: tpcds_060
-- TPC-DS q99
INSERT OVERWRITE TABLE mart.catalog_ship_latency
SELECT substr(w_warehouse_name, 1, 20), sm_type, cc_name,
       sum(CASE WHEN (cs_ship_date_sk - cs_sold_date_sk <= 30) THEN 1 ELSE 0 END) AS days_30,
       sum(CASE WHEN (cs_ship_date_sk - cs_sold_date_sk > 30) AND (cs_ship_date_sk - cs_sold_date_sk <= 60)
                THEN 1 ELSE 0 END) AS days_31_60,
       sum(CASE WHEN (cs_ship_date_sk - cs_sold_date_sk > 60) THEN 1 ELSE 0 END) AS days_over_60
FROM tpcds.catalog_sales, tpcds.warehouse, tpcds.ship_mode, tpcds.call_center, tpcds.date_dim
WHERE d_month_seq BETWEEN 1200 AND 1200 + 11
  AND cs_ship_date_sk = d_date_sk
  AND cs_warehouse_sk = w_warehouse_sk
  AND cs_ship_mode_sk = sm_ship_mode_sk
  AND cs_call_center_sk = cc_call_center_sk
GROUP BY substr(w_warehouse_name, 1, 20), sm_type, cc_name;

-- @id: tpcds_061
-- TPC-DS q21: inventory 30 days before and after a price change
INSERT OVERWRITE TABLE mart.inventory_around_price_change
SELECT *
FROM (
  SELECT w_warehouse_name,
         i_item_id,
         sum(CASE WHEN d_date < DATE '2000-03-11' THEN inv_quantity_on_hand ELSE 0 END) AS inv_before,
         sum(CASE WHEN d_date >= DATE '2000-03-11' THEN inv_quantity_on_hand ELSE 0 END) AS inv_after
  FROM tpcds.inventory, tpcds.warehouse, tpcds.item, tpcds.date_dim
  WHERE i_current_price BETWEEN 0.99 AND 1.49
    AND i_item_sk = inv_item_sk
    AND inv_warehouse_sk = w_warehouse_sk
    AND inv_date_sk = d_date_sk
    AND d_date BETWEEN date_sub(DATE '2000-03-11', 30) AND date_add(DATE '2000-03-11', 30)
  GROUP BY w_warehouse_name, i_item_id
) x
WHERE (CASE WHEN inv_before > 0 THEN inv_after / inv_before ELSE NULL END) BETWEEN 2.0 / 3.0 AND 3.0 / 2.0;

-- @id: tpcds_062
-- TPC-DS q39: coefficient of variation of inventory
INSERT OVERWRITE TABLE mart.inventory_variation
WITH inv AS (
  SELECT w_warehouse_name, w_warehouse_sk, i_item_sk, d_moy, stdev, mean,
         CASE mean WHEN 0 THEN NULL ELSE stdev / mean END cov
  FROM (SELECT w_warehouse_name, w_warehouse_sk, i_item_sk, d_moy,
               stddev_samp(inv_quantity_on_hand) stdev, avg(inv_quantity_on_hand) mean
        FROM tpcds.inventory, tpcds.item, tpcds.warehouse, tpcds.date_dim
        WHERE inv_item_sk = i_item_sk AND inv_warehouse_sk = w_warehouse_sk
          AND inv_date_sk = d_date_sk AND d_year = 2001
        GROUP BY w_warehouse_name, w_warehouse_sk, i_item_sk, d_moy) foo
  WHERE CASE mean WHEN 0 THEN 0 ELSE stdev / mean END > 1
)
SELECT inv1.w_warehouse_sk, inv1.i_item_sk, inv1.d_moy, inv1.mean, inv1.cov,
       inv2.d_moy AS next_moy, inv2.mean AS next_mean, inv2.cov AS next_cov
FROM inv inv1, inv inv2
WHERE inv1.i_item_sk = inv2.i_item_sk
  AND inv1.w_warehouse_sk = inv2.w_warehouse_sk
  AND inv1.d_moy = 1
  AND inv2.d_moy = 1 + 1;

-- @id: tpcds_063
-- TPC-DS q59: weekly store sales this year against last year
INSERT OVERWRITE TABLE mart.store_week_over_year
WITH wss AS (
  SELECT d_week_seq, ss_store_sk,
         sum(CASE WHEN d_day_name = 'Sunday' THEN ss_sales_price ELSE NULL END) sun_sales,
         sum(CASE WHEN d_day_name = 'Monday' THEN ss_sales_price ELSE NULL END) mon_sales,
         sum(CASE WHEN d_day_name = 'Friday' THEN ss_sales_price ELSE NULL END) fri_sales,
         sum(CASE WHEN d_day_name = 'Saturday' THEN ss_sales_price ELSE NULL END) sat_sales
  FROM tpcds.store_sales, tpcds.date_dim
  WHERE d_date_sk = ss_sold_date_sk
  GROUP BY d_week_seq, ss_store_sk
)
SELECT s_store_name1, s_store_id1, d_week_seq1,
       sun_sales1 / sun_sales2, mon_sales1 / mon_sales2, fri_sales1 / fri_sales2, sat_sales1 / sat_sales2
FROM (SELECT s_store_name s_store_name1, wss.d_week_seq d_week_seq1, s_store_id s_store_id1,
             sun_sales sun_sales1, mon_sales mon_sales1, fri_sales fri_sales1, sat_sales sat_sales1
      FROM wss, tpcds.store, tpcds.date_dim d
      WHERE d.d_week_seq = wss.d_week_seq AND ss_store_sk = s_store_sk AND d_month_seq BETWEEN 1212 AND 1212 + 11) y,
     (SELECT s_store_name s_store_name2, wss.d_week_seq d_week_seq2, s_store_id s_store_id2,
             sun_sales sun_sales2, mon_sales mon_sales2, fri_sales fri_sales2, sat_sales sat_sales2
      FROM wss, tpcds.store, tpcds.date_dim d
      WHERE d.d_week_seq = wss.d_week_seq AND ss_store_sk = s_store_sk AND d_month_seq BETWEEN 1224 AND 1224 + 11) x
WHERE s_store_id1 = s_store_id2
  AND d_week_seq1 = d_week_seq2 - 52;

-- @id: tpcds_064
-- TPC-DS q61: promotional share of sales
INSERT INTO mart.promotion_share
SELECT promotions, total, CAST(promotions AS DECIMAL(15,4)) / CAST(total AS DECIMAL(15,4)) * 100 AS pct
FROM (SELECT sum(ss_ext_sales_price) promotions
      FROM tpcds.store_sales, tpcds.store, tpcds.promotion, tpcds.date_dim, tpcds.customer,
           tpcds.customer_address, tpcds.item
      WHERE ss_sold_date_sk = d_date_sk AND ss_store_sk = s_store_sk AND ss_promo_sk = p_promo_sk
        AND ss_customer_sk = c_customer_sk AND ca_address_sk = c_current_addr_sk AND ss_item_sk = i_item_sk
        AND ca_gmt_offset = -5 AND i_category = 'Jewelry'
        AND (p_channel_dmail = 'Y' OR p_channel_email = 'Y' OR p_channel_tv = 'Y')
        AND s_gmt_offset = -5 AND d_year = 1998 AND d_moy = 11) promotional_sales,
     (SELECT sum(ss_ext_sales_price) total
      FROM tpcds.store_sales, tpcds.store, tpcds.date_dim, tpcds.customer, tpcds.customer_address, tpcds.item
      WHERE ss_sold_date_sk = d_date_sk AND ss_store_sk = s_store_sk AND ss_customer_sk = c_customer_sk
        AND ca_address_sk = c_current_addr_sk AND ss_item_sk = i_item_sk AND ca_gmt_offset = -5
        AND i_category = 'Jewelry' AND s_gmt_offset = -5 AND d_year = 1998 AND d_moy = 11) all_sales;

-- @id: tpcds_065
-- TPC-DS q66 (shortened to three months): warehouse sales per month, web and catalog
INSERT OVERWRITE TABLE mart.warehouse_monthly_sales PARTITION (year = 2001)
SELECT w_warehouse_name, w_warehouse_sq_ft, w_city, w_county, w_state, w_country, ship_carriers,
       sum(jan_sales) AS jan_sales, sum(feb_sales) AS feb_sales, sum(mar_sales) AS mar_sales,
       sum(jan_net) AS jan_net, sum(feb_net) AS feb_net, sum(mar_net) AS mar_net
FROM (
  SELECT w_warehouse_name, w_warehouse_sq_ft, w_city, w_county, w_state, w_country,
         concat('DHL', ',', 'BARIAN') AS ship_carriers,
         sum(CASE WHEN d_moy = 1 THEN ws_ext_sales_price * ws_quantity ELSE 0 END) AS jan_sales,
         sum(CASE WHEN d_moy = 2 THEN ws_ext_sales_price * ws_quantity ELSE 0 END) AS feb_sales,
         sum(CASE WHEN d_moy = 3 THEN ws_ext_sales_price * ws_quantity ELSE 0 END) AS mar_sales,
         sum(CASE WHEN d_moy = 1 THEN ws_net_paid * ws_quantity ELSE 0 END) AS jan_net,
         sum(CASE WHEN d_moy = 2 THEN ws_net_paid * ws_quantity ELSE 0 END) AS feb_net,
         sum(CASE WHEN d_moy = 3 THEN ws_net_paid * ws_quantity ELSE 0 END) AS mar_net
  FROM tpcds.web_sales, tpcds.warehouse, tpcds.date_dim, tpcds.time_dim, tpcds.ship_mode
  WHERE ws_warehouse_sk = w_warehouse_sk
    AND ws_sold_date_sk = d_date_sk
    AND ws_sold_time_sk = t_time_sk
    AND ws_ship_mode_sk = sm_ship_mode_sk
    AND d_year = 2001
    AND t_time BETWEEN 30838 AND 30838 + 28800
    AND sm_carrier IN ('DHL', 'BARIAN')
  GROUP BY w_warehouse_name, w_warehouse_sq_ft, w_city, w_county, w_state, w_country, d_year
  UNION ALL
  SELECT w_warehouse_name, w_warehouse_sq_ft, w_city, w_county, w_state, w_country,
         concat('DHL', ',', 'BARIAN') AS ship_carriers,
         sum(CASE WHEN d_moy = 1 THEN cs_sales_price * cs_quantity ELSE 0 END) AS jan_sales,
         sum(CASE WHEN d_moy = 2 THEN cs_sales_price * cs_quantity ELSE 0 END) AS feb_sales,
         sum(CASE WHEN d_moy = 3 THEN cs_sales_price * cs_quantity ELSE 0 END) AS mar_sales,
         sum(CASE WHEN d_moy = 1 THEN cs_net_paid_inc_tax * cs_quantity ELSE 0 END) AS jan_net,
         sum(CASE WHEN d_moy = 2 THEN cs_net_paid_inc_tax * cs_quantity ELSE 0 END) AS feb_net,
         sum(CASE WHEN d_moy = 3 THEN cs_net_paid_inc_tax * cs_quantity ELSE 0 END) AS mar_net
  FROM tpcds.catalog_sales, tpcds.warehouse, tpcds.date_dim, tpcds.time_dim, tpcds.ship_mode
  WHERE cs_warehouse_sk = w_warehouse_sk
    AND cs_sold_date_sk = d_date_sk
    AND cs_sold_time_sk = t_time_sk
    AND cs_ship_mode_sk = sm_ship_mode_sk
    AND d_year = 2001
    AND t_time BETWEEN 30838 AND 30838 + 28800
    AND sm_carrier IN ('DHL', 'BARIAN')
  GROUP BY w_warehouse_name, w_warehouse_sq_ft, w_city, w_county, w_state, w_country, d_year
) x
GROUP BY w_warehouse_name, w_warehouse_sq_ft, w_city, w_county, w_state, w_country, ship_carriers;

-- @id: tpcds_066
-- TPC-DS q77 (store and web channels): profit by channel and outlet
INSERT OVERWRITE TABLE mart.outlet_profit
WITH ss AS (
  SELECT s_store_sk, sum(ss_ext_sales_price) AS sales, sum(ss_net_profit) AS profit
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.store
  WHERE ss_sold_date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND date_add(DATE '2000-08-23', 30)
    AND ss_store_sk = s_store_sk
  GROUP BY s_store_sk
),
sr AS (
  SELECT s_store_sk, sum(sr_return_amt) AS returns, sum(sr_net_loss) AS profit_loss
  FROM tpcds.store_returns, tpcds.date_dim, tpcds.store
  WHERE sr_returned_date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND date_add(DATE '2000-08-23', 30)
    AND sr_store_sk = s_store_sk
  GROUP BY s_store_sk
),
ws AS (
  SELECT wp_web_page_sk, sum(ws_ext_sales_price) AS sales, sum(ws_net_profit) AS profit
  FROM tpcds.web_sales, tpcds.date_dim, tpcds.web_page
  WHERE ws_sold_date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND date_add(DATE '2000-08-23', 30)
    AND ws_web_page_sk = wp_web_page_sk
  GROUP BY wp_web_page_sk
),
wr AS (
  SELECT wp_web_page_sk, sum(wr_return_amt) AS returns, sum(wr_net_loss) AS profit_loss
  FROM tpcds.web_returns, tpcds.date_dim, tpcds.web_page
  WHERE wr_returned_date_sk = d_date_sk
    AND d_date BETWEEN DATE '2000-08-23' AND date_add(DATE '2000-08-23', 30)
    AND wr_web_page_sk = wp_web_page_sk
  GROUP BY wp_web_page_sk
)
SELECT channel, id, sum(sales) AS sales, sum(returns) AS returns, sum(profit) AS profit
FROM (
  SELECT 'store channel' AS channel, ss.s_store_sk AS id, sales,
         coalesce(returns, 0) AS returns, (profit - coalesce(profit_loss, 0)) AS profit
  FROM ss LEFT JOIN sr ON ss.s_store_sk = sr.s_store_sk
  UNION ALL
  SELECT 'web channel' AS channel, ws.wp_web_page_sk AS id, sales,
         coalesce(returns, 0) returns, (profit - coalesce(profit_loss, 0)) AS profit
  FROM ws LEFT JOIN wr ON ws.wp_web_page_sk = wr.wp_web_page_sk
) x
GROUP BY ROLLUP (channel, id);

-- @id: tpcds_067
-- TPC-DS q80 (store channel): sales, returns and profit by store with promotions
INSERT OVERWRITE TABLE mart.store_promo_profit
SELECT s_store_id AS store_id,
       sum(ss_ext_sales_price) AS sales,
       sum(coalesce(sr_return_amt, 0)) AS returns,
       sum(ss_net_profit - coalesce(sr_net_loss, 0)) AS profit
FROM tpcds.store_sales
LEFT OUTER JOIN tpcds.store_returns ON (ss_item_sk = sr_item_sk AND ss_ticket_number = sr_ticket_number),
     tpcds.date_dim, tpcds.store, tpcds.item, tpcds.promotion
WHERE ss_sold_date_sk = d_date_sk
  AND d_date BETWEEN CAST('2000-08-23' AS DATE) AND date_add(CAST('2000-08-23' AS DATE), 30)
  AND ss_store_sk = s_store_sk
  AND ss_item_sk = i_item_sk
  AND i_current_price > 50
  AND ss_promo_sk = p_promo_sk
  AND p_channel_tv = 'N'
GROUP BY s_store_id;

-- @id: tpcds_068
-- TPC-DS q83: returned quantities of the same items in three channels
INSERT OVERWRITE TABLE mart.returns_by_channel_item
WITH sr_items AS (
  SELECT i_item_id item_id, sum(sr_return_quantity) sr_item_qty
  FROM tpcds.store_returns, tpcds.item, tpcds.date_dim
  WHERE sr_item_sk = i_item_sk
    AND d_date IN (SELECT d_date FROM tpcds.date_dim
                   WHERE d_week_seq IN (SELECT d_week_seq FROM tpcds.date_dim
                                        WHERE d_date IN (DATE '2000-06-30', DATE '2000-09-27', DATE '2000-11-17')))
    AND sr_returned_date_sk = d_date_sk
  GROUP BY i_item_id
),
cr_items AS (
  SELECT i_item_id item_id, sum(cr_return_quantity) cr_item_qty
  FROM tpcds.catalog_returns, tpcds.item, tpcds.date_dim
  WHERE cr_item_sk = i_item_sk
    AND d_date IN (SELECT d_date FROM tpcds.date_dim
                   WHERE d_week_seq IN (SELECT d_week_seq FROM tpcds.date_dim
                                        WHERE d_date IN (DATE '2000-06-30', DATE '2000-09-27', DATE '2000-11-17')))
    AND cr_returned_date_sk = d_date_sk
  GROUP BY i_item_id
),
wr_items AS (
  SELECT i_item_id item_id, sum(wr_return_quantity) wr_item_qty
  FROM tpcds.web_returns, tpcds.item, tpcds.date_dim
  WHERE wr_item_sk = i_item_sk
    AND d_date IN (SELECT d_date FROM tpcds.date_dim
                   WHERE d_week_seq IN (SELECT d_week_seq FROM tpcds.date_dim
                                        WHERE d_date IN (DATE '2000-06-30', DATE '2000-09-27', DATE '2000-11-17')))
    AND wr_returned_date_sk = d_date_sk
  GROUP BY i_item_id
)
SELECT sr_items.item_id,
       sr_item_qty,
       sr_item_qty / (sr_item_qty + cr_item_qty + wr_item_qty) / 3.0 * 100 sr_dev,
       cr_item_qty,
       wr_item_qty,
       (sr_item_qty + cr_item_qty + wr_item_qty) / 3.0 average
FROM sr_items, cr_items, wr_items
WHERE sr_items.item_id = cr_items.item_id
  AND sr_items.item_id = wr_items.item_id;

-- @id: tpcds_069
-- TPC-DS q86: web sales rolled up, ranked inside each level
INSERT OVERWRITE TABLE mart.web_category_rank
SELECT sum(ws_net_paid) AS total_sum,
       i_category,
       i_class,
       grouping(i_category) + grouping(i_class) AS lochierarchy,
       rank() OVER (PARTITION BY grouping(i_category) + grouping(i_class),
                                 CASE WHEN grouping(i_class) = 0 THEN i_category END
                    ORDER BY sum(ws_net_paid) DESC) AS rank_within_parent
FROM tpcds.web_sales, tpcds.date_dim d1, tpcds.item
WHERE d1.d_month_seq BETWEEN 1200 AND 1200 + 11
  AND d1.d_date_sk = ws_sold_date_sk
  AND i_item_sk = ws_item_sk
GROUP BY ROLLUP (i_category, i_class);

-- @id: tpcds_070
-- TPC-DS q87: store-only customers, counted
INSERT INTO mart.store_only_customer_count
SELECT count(*)
FROM (
  SELECT DISTINCT c_last_name, c_first_name, d_date
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.customer
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_customer_sk = customer.c_customer_sk
    AND d_month_seq BETWEEN 1200 AND 1200 + 11
  EXCEPT
  SELECT DISTINCT c_last_name, c_first_name, d_date
  FROM tpcds.catalog_sales, tpcds.date_dim, tpcds.customer
  WHERE catalog_sales.cs_sold_date_sk = date_dim.d_date_sk
    AND catalog_sales.cs_bill_customer_sk = customer.c_customer_sk
    AND d_month_seq BETWEEN 1200 AND 1200 + 11
) cool_cust;

-- @id: tpcds_071
-- TPC-DS q94
INSERT INTO mart.single_warehouse_web_orders
SELECT count(DISTINCT ws_order_number) AS order_count,
       sum(ws_ext_ship_cost) AS total_shipping_cost,
       sum(ws_net_profit) AS total_net_profit
FROM tpcds.web_sales ws1, tpcds.date_dim, tpcds.customer_address, tpcds.web_site
WHERE d_date BETWEEN DATE '1999-02-01' AND date_add(DATE '1999-02-01', 60)
  AND ws1.ws_ship_date_sk = d_date_sk
  AND ws1.ws_ship_addr_sk = ca_address_sk
  AND ca_state = 'IL'
  AND ws1.ws_web_site_sk = web_site_sk
  AND web_company_name = 'pri'
  AND EXISTS (SELECT * FROM tpcds.web_sales ws2
              WHERE ws1.ws_order_number = ws2.ws_order_number AND ws1.ws_warehouse_sk <> ws2.ws_warehouse_sk)
  AND NOT EXISTS (SELECT * FROM tpcds.web_returns wr1 WHERE ws1.ws_order_number = wr1.wr_order_number);

-- @id: tpcds_072
-- TPC-DS q56: one item list, three channels
INSERT OVERWRITE TABLE mart.color_item_sales
WITH ss AS (
  SELECT i_item_id, sum(ss_ext_sales_price) total_sales
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.customer_address, tpcds.item
  WHERE i_item_id IN (SELECT i_item_id FROM tpcds.item WHERE i_color IN ('slate', 'blanched', 'burnished'))
    AND ss_item_sk = i_item_sk AND ss_sold_date_sk = d_date_sk AND d_year = 2001 AND d_moy = 2
    AND ss_addr_sk = ca_address_sk AND ca_gmt_offset = -5
  GROUP BY i_item_id
),
cs AS (
  SELECT i_item_id, sum(cs_ext_sales_price) total_sales
  FROM tpcds.catalog_sales, tpcds.date_dim, tpcds.customer_address, tpcds.item
  WHERE i_item_id IN (SELECT i_item_id FROM tpcds.item WHERE i_color IN ('slate', 'blanched', 'burnished'))
    AND cs_item_sk = i_item_sk AND cs_sold_date_sk = d_date_sk AND d_year = 2001 AND d_moy = 2
    AND cs_bill_addr_sk = ca_address_sk AND ca_gmt_offset = -5
  GROUP BY i_item_id
),
ws AS (
  SELECT i_item_id, sum(ws_ext_sales_price) total_sales
  FROM tpcds.web_sales, tpcds.date_dim, tpcds.customer_address, tpcds.item
  WHERE i_item_id IN (SELECT i_item_id FROM tpcds.item WHERE i_color IN ('slate', 'blanched', 'burnished'))
    AND ws_item_sk = i_item_sk AND ws_sold_date_sk = d_date_sk AND d_year = 2001 AND d_moy = 2
    AND ws_bill_addr_sk = ca_address_sk AND ca_gmt_offset = -5
  GROUP BY i_item_id
)
SELECT i_item_id, sum(total_sales) total_sales
FROM (SELECT * FROM ss UNION ALL SELECT * FROM cs UNION ALL SELECT * FROM ws) tmp1
GROUP BY i_item_id;

-- @id: tpcds_073
-- TPC-DS q33 (store channel only)
INSERT OVERWRITE TABLE mart.manufacturer_sales
SELECT i_manufact_id, sum(ss_ext_sales_price) total_sales
FROM tpcds.store_sales, tpcds.date_dim, tpcds.customer_address, tpcds.item
WHERE i_manufact_id IN (SELECT i_manufact_id FROM tpcds.item WHERE i_category IN ('Electronics'))
  AND ss_item_sk = i_item_sk
  AND ss_sold_date_sk = d_date_sk
  AND d_year = 1998
  AND d_moy = 5
  AND ss_addr_sk = ca_address_sk
  AND ca_gmt_offset = -5
GROUP BY i_manufact_id;

-- @id: tpcds_074
-- TPC-DS q9: CASE picks one of two scalar subqueries; the count only decides which
INSERT INTO mart.quantity_bucket_stats
SELECT CASE WHEN (SELECT count(*) FROM tpcds.store_sales WHERE ss_quantity BETWEEN 1 AND 20) > 74129
            THEN (SELECT avg(ss_ext_discount_amt) FROM tpcds.store_sales WHERE ss_quantity BETWEEN 1 AND 20)
            ELSE (SELECT avg(ss_net_paid) FROM tpcds.store_sales WHERE ss_quantity BETWEEN 1 AND 20) END bucket1,
       CASE WHEN (SELECT count(*) FROM tpcds.store_sales WHERE ss_quantity BETWEEN 21 AND 40) > 122840
            THEN (SELECT avg(ss_ext_discount_amt) FROM tpcds.store_sales WHERE ss_quantity BETWEEN 21 AND 40)
            ELSE (SELECT avg(ss_net_paid) FROM tpcds.store_sales WHERE ss_quantity BETWEEN 21 AND 40) END bucket2
FROM tpcds.reason
WHERE r_reason_sk = 1;

-- @id: tpcds_075
-- TPC-DS q28 (two buckets)
INSERT INTO mart.list_price_buckets
SELECT *
FROM (SELECT avg(ss_list_price) b1_lp, count(ss_list_price) b1_cnt, count(DISTINCT ss_list_price) b1_cntd
      FROM tpcds.store_sales
      WHERE ss_quantity BETWEEN 0 AND 5
        AND (ss_list_price BETWEEN 8 AND 8 + 10 OR ss_coupon_amt BETWEEN 459 AND 459 + 1000
             OR ss_wholesale_cost BETWEEN 57 AND 57 + 20)) b1,
     (SELECT avg(ss_list_price) b2_lp, count(ss_list_price) b2_cnt, count(DISTINCT ss_list_price) b2_cntd
      FROM tpcds.store_sales
      WHERE ss_quantity BETWEEN 6 AND 10
        AND (ss_list_price BETWEEN 90 AND 90 + 10 OR ss_coupon_amt BETWEEN 2323 AND 2323 + 1000
             OR ss_wholesale_cost BETWEEN 31 AND 31 + 20)) b2;

-- @id: tpcds_076
-- archive copy: SELECT * maps positionally onto an identical table
INSERT INTO mart.store_sales_archive
SELECT * FROM tpcds.store_sales WHERE ss_sold_date_sk < 2451180;

-- @id: tpcds_077
CREATE TABLE mart.item_snapshot USING parquet AS
SELECT * FROM tpcds.item;

-- @id: tpcds_078
CREATE OR REPLACE VIEW mart.v_open_stores AS
SELECT s.*
FROM tpcds.store s
WHERE s.s_rec_end_date IS NULL;

-- @id: tpcds_079
-- address cleaning; country_code keeps ca_country through the ELSE branch
INSERT OVERWRITE TABLE mart.customer_address_clean
SELECT ca_address_sk,
       initcap(trim(regexp_replace(concat_ws(' ', ca_street_number, ca_street_name, ca_street_type), '\\s+', ' '))) AS street,
       initcap(ca_city) AS city,
       upper(ca_state) AS state,
       lpad(ca_zip, 5, '0') AS zip,
       CASE WHEN ca_country = 'United States' THEN 'US' ELSE ca_country END AS country_code
FROM tpcds.customer_address
WHERE ca_address_sk IS NOT NULL;

-- @id: tpcds_080
-- latest inventory per item and warehouse; row_number only filters
MERGE INTO mart.inventory_latest AS t
USING (
  SELECT inv_item_sk, inv_warehouse_sk, inv_quantity_on_hand, d_date
  FROM (
    SELECT inv.inv_item_sk, inv.inv_warehouse_sk, inv.inv_quantity_on_hand, d.d_date,
           row_number() OVER (PARTITION BY inv.inv_item_sk, inv.inv_warehouse_sk ORDER BY d.d_date DESC) AS rn
    FROM tpcds.inventory inv
    JOIN tpcds.date_dim d ON inv.inv_date_sk = d.d_date_sk
  ) ranked
  WHERE rn = 1
) AS s
ON t.item_sk = s.inv_item_sk AND t.warehouse_sk = s.inv_warehouse_sk
WHEN MATCHED AND s.d_date > t.snapshot_date THEN UPDATE SET
  t.quantity_on_hand = s.inv_quantity_on_hand,
  t.snapshot_date = s.d_date
WHEN NOT MATCHED THEN INSERT (item_sk, warehouse_sk, quantity_on_hand, snapshot_date)
  VALUES (s.inv_item_sk, s.inv_warehouse_sk, s.inv_quantity_on_hand, s.d_date);

-- @id: tpcds_081
-- retired items are deleted; a MERGE with a DELETE clause
MERGE INTO mart.dim_item AS t
USING tpcds.item AS s
ON t.item_sk = s.i_item_sk
WHEN MATCHED AND s.i_rec_end_date IS NOT NULL THEN DELETE
WHEN MATCHED THEN UPDATE SET
  t.current_price = s.i_current_price,
  t.brand = upper(s.i_brand)
WHEN NOT MATCHED AND s.i_rec_end_date IS NULL THEN
  INSERT (item_sk, item_id, product_name, brand, class, category, current_price, color)
  VALUES (s.i_item_sk, s.i_item_id, trim(s.i_product_name), upper(s.i_brand), s.i_class, s.i_category,
          s.i_current_price, coalesce(s.i_color, 'unknown'));

-- @id: tpcds_082
INSERT INTO mart.etl_audit VALUES ('tpcds_daily', current_timestamp(), 0, 'started');

-- @id: tpcds_083
-- nested struct built from columns
CREATE TABLE mart.customer_profile_struct USING parquet AS
SELECT c.c_customer_sk AS customer_sk,
       named_struct('first', c.c_first_name, 'last', c.c_last_name) AS name,
       named_struct('city', ca.ca_city, 'state', ca.ca_state, 'zip', ca.ca_zip) AS address,
       array(c.c_email_address, c.c_login) AS contacts
FROM tpcds.customer c
JOIN tpcds.customer_address ca ON ca.ca_address_sk = c.c_current_addr_sk;

-- @id: tpcds_084
-- lifetime value, with a repartition hint and DISTRIBUTE BY
INSERT OVERWRITE TABLE mart.customer_ltv
SELECT /*+ REPARTITION(16) */
       ss_customer_sk AS customer_sk,
       count(DISTINCT ss_ticket_number) AS tickets,
       sum(ss_net_paid) AS lifetime_paid,
       max(d_date) AS last_purchase
FROM tpcds.store_sales
JOIN tpcds.date_dim ON ss_sold_date_sk = d_date_sk
WHERE ss_customer_sk IS NOT NULL
GROUP BY ss_customer_sk
DISTRIBUTE BY customer_sk;

-- @id: tpcds_085
-- unqualified target: the session database (default)
INSERT INTO stg_item_prices
SELECT i_item_sk, i_current_price, i_wholesale_cost, current_date()
FROM tpcds.item
WHERE i_rec_end_date IS NULL;

-- @id: tpcds_086
-- three-part name with the session catalog
INSERT OVERWRITE TABLE spark_catalog.mart.daily_returns
SELECT sr_returned_date_sk, sr_store_sk, sum(sr_return_quantity), sum(sr_return_amt)
FROM spark_catalog.tpcds.store_returns
GROUP BY sr_returned_date_sk, sr_store_sk;

-- @id: tpcds_087
-- quoted and mixed-case identifiers
INSERT INTO `Mart`.`Web_Returns_Daily`
SELECT WR_RETURNED_DATE_SK, `wr_web_page_sk`, SUM(Wr_Return_Amt), SUM(`WR_NET_LOSS`)
FROM `TPCDS`.`Web_Returns`
GROUP BY WR_RETURNED_DATE_SK, `wr_web_page_sk`;

-- @id: tpcds_088
-- ad-hoc report, no write
SELECT d_year, i_category, sum(ss_net_paid) AS paid
FROM tpcds.store_sales
JOIN tpcds.date_dim ON ss_sold_date_sk = d_date_sk
JOIN tpcds.item ON ss_item_sk = i_item_sk
WHERE d_year BETWEEN 2000 AND 2002
GROUP BY d_year, i_category
ORDER BY d_year, paid DESC;

-- @id: tpcds_089
SELECT s_state, count(DISTINCT s_store_sk) AS stores, avg(s_number_employees) AS avg_employees
FROM tpcds.store
GROUP BY s_state
HAVING count(*) > 1;

-- @id: tpcds_090
-- days since the customer's previous ticket: lag() keeps d_date as the value
INSERT OVERWRITE TABLE mart.customer_purchase_gaps
SELECT ss_customer_sk,
       ss_ticket_number,
       d_date AS purchase_date,
       datediff(d_date, lag(d_date) OVER (PARTITION BY ss_customer_sk ORDER BY d_date)) AS days_since_prev
FROM (
  SELECT DISTINCT ss_customer_sk, ss_ticket_number, d_date
  FROM tpcds.store_sales
  JOIN tpcds.date_dim ON ss_sold_date_sk = d_date_sk
  WHERE ss_customer_sk IS NOT NULL
) t;

-- @id: tpcds_091
INSERT OVERWRITE TABLE mart.customer_spend_decile
SELECT ss_customer_sk, sum(ss_net_paid) AS spend, ntile(10) OVER (ORDER BY sum(ss_net_paid)) AS decile
FROM tpcds.store_sales
GROUP BY ss_customer_sk;

-- @id: tpcds_092
-- scalar subqueries in the select list
INSERT OVERWRITE TABLE mart.item_price_vs_average
SELECT i_item_sk,
       i_current_price,
       (SELECT avg(i2.i_current_price) FROM tpcds.item i2) AS avg_price,
       i_current_price - (SELECT avg(i3.i_current_price) FROM tpcds.item i3) AS price_delta
FROM tpcds.item;

-- @id: tpcds_093
-- if(), nvl() and nvl2(): conditions are indirect, the values direct
INSERT OVERWRITE TABLE mart.return_refund_split
SELECT sr_ticket_number,
       sr_item_sk,
       if(sr_refunded_cash > 0, sr_refunded_cash, sr_store_credit) AS refund_amount,
       nvl(sr_fee, 0) AS fee,
       nvl2(sr_reason_sk, 'with reason', 'no reason') AS reason_flag
FROM tpcds.store_returns;

-- @id: tpcds_094
-- UNION (distinct) of buyers from two channels
INSERT OVERWRITE TABLE mart.multichannel_buyers
SELECT ss_customer_sk AS customer_sk, 'store' AS channel FROM tpcds.store_sales WHERE ss_customer_sk IS NOT NULL
UNION
SELECT ws_bill_customer_sk, 'web' FROM tpcds.web_sales WHERE ws_bill_customer_sk IS NOT NULL;

-- @id: tpcds_095
-- Spark's LEFT SEMI and LEFT ANTI joins only filter
INSERT OVERWRITE TABLE mart.store_buyers_never_online
SELECT c.c_customer_sk, c.c_email_address
FROM tpcds.customer c
LEFT SEMI JOIN tpcds.store_sales ss ON ss.ss_customer_sk = c.c_customer_sk
LEFT ANTI JOIN tpcds.web_sales ws ON ws.ws_bill_customer_sk = c.c_customer_sk;

-- @id: tpcds_096
CREATE TABLE mart.category_sales_sets USING parquet AS
SELECT i_category, i_class, s_state, sum(ss_net_paid) AS paid
FROM tpcds.store_sales
JOIN tpcds.item ON ss_item_sk = i_item_sk
JOIN tpcds.store ON ss_store_sk = s_store_sk
GROUP BY i_category, i_class, s_state
GROUPING SETS ((i_category, i_class), (s_state), ());

-- @id: tpcds_097
-- a view with a column list; price_band is decided by conditions only
CREATE OR REPLACE VIEW mart.v_item_price_band (item_sk, price, price_band) AS
SELECT i_item_sk,
       i_current_price,
       CASE WHEN i_current_price < 10 THEN 'low'
            WHEN i_current_price < 100 THEN 'mid'
            ELSE 'high' END
FROM tpcds.item;

-- @id: tpcds_098
-- the CTE comes before INSERT
WITH returns_by_reason AS (
  SELECT sr_reason_sk, sum(sr_return_amt) AS amt, count(*) AS cnt
  FROM tpcds.store_returns
  GROUP BY sr_reason_sk
)
INSERT OVERWRITE TABLE mart.return_reasons
SELECT r.r_reason_id, r.r_reason_desc, rr.amt, rr.cnt
FROM returns_by_reason rr
JOIN tpcds.reason r ON r.r_reason_sk = rr.sr_reason_sk;

-- @id: tpcds_099
CREATE TABLE IF NOT EXISTS mart.item_first_sale USING parquet AS
SELECT ss_item_sk AS item_sk, min(ss_sold_date_sk) AS first_sold_date_sk
FROM tpcds.store_sales
GROUP BY ss_item_sk;

-- @id: tpcds_100
-- three levels of derived tables
INSERT OVERWRITE TABLE mart.store_margin_band
SELECT store_sk, margin, margin_pct
FROM (
  SELECT store_sk, margin, margin / NULLIF(revenue, 0) * 100 AS margin_pct
  FROM (
    SELECT store_sk, sum(revenue) AS revenue, sum(revenue - cost) AS margin
    FROM (
      SELECT ss_store_sk AS store_sk, ss_ext_sales_price AS revenue, ss_ext_wholesale_cost AS cost
      FROM tpcds.store_sales
      WHERE ss_store_sk IS NOT NULL
    ) lines
    GROUP BY store_sk
  ) totals
) pct
WHERE margin_pct > 5;

-- @id: tpcds_101
-- two dynamic partition columns
INSERT OVERWRITE TABLE mart.catalog_sales_monthly PARTITION (year, month)
SELECT cs_item_sk, sum(cs_quantity) AS quantity, sum(cs_net_paid) AS net_paid, d_year, d_moy
FROM tpcds.catalog_sales
JOIN tpcds.date_dim ON cs_sold_date_sk = d_date_sk
GROUP BY cs_item_sk, d_year, d_moy;

-- @id: tpcds_102
-- static year, dynamic month
INSERT OVERWRITE TABLE mart.web_sales_monthly PARTITION (year = 2001, month)
SELECT ws_item_sk, sum(ws_quantity), sum(ws_net_paid), d_moy
FROM tpcds.web_sales
JOIN tpcds.date_dim ON ws_sold_date_sk = d_date_sk
WHERE d_year = 2001
GROUP BY ws_item_sk, d_moy;

-- @id: tpcds_103
-- collect_set, concat_ws and percentile_approx
INSERT OVERWRITE TABLE mart.item_buyer_stats
SELECT ss_item_sk,
       concat_ws(',', collect_set(CAST(ss_store_sk AS STRING))) AS store_list,
       percentile_approx(ss_sales_price, 0.5) AS median_price,
       approx_count_distinct(ss_customer_sk) AS buyers
FROM tpcds.store_sales
GROUP BY ss_item_sk;

-- @id: tpcds_104
-- the same column in a condition and in both branches
INSERT OVERWRITE TABLE mart.return_amount_capped
SELECT sr_ticket_number,
       CASE WHEN sr_return_amt > sr_return_amt_inc_tax THEN sr_return_amt_inc_tax ELSE sr_return_amt END AS amount
FROM tpcds.store_returns;

-- @id: tpcds_105
-- customers who returned more than they kept
INSERT OVERWRITE TABLE mart.serial_returners
SELECT c.c_customer_id, c.c_email_address, r.returned, s.bought
FROM (SELECT sr_customer_sk, sum(sr_return_quantity) AS returned FROM tpcds.store_returns GROUP BY sr_customer_sk) r
JOIN (SELECT ss_customer_sk, sum(ss_quantity) AS bought FROM tpcds.store_sales GROUP BY ss_customer_sk) s
  ON r.sr_customer_sk = s.ss_customer_sk
JOIN tpcds.customer c ON c.c_customer_sk = r.sr_customer_sk
WHERE r.returned > 0.5 * s.bought;

-- @id: tpcds_106
-- PIVOT: d_qoy picks the output column, ss_net_paid is the value
INSERT OVERWRITE TABLE mart.category_quarter_pivot
SELECT *
FROM (
  SELECT i_category, d_qoy, ss_net_paid
  FROM tpcds.store_sales
  JOIN tpcds.item ON ss_item_sk = i_item_sk
  JOIN tpcds.date_dim ON ss_sold_date_sk = d_date_sk
  WHERE d_year = 2001
) src
PIVOT (sum(ss_net_paid) FOR d_qoy IN (1 AS q1, 2 AS q2, 3 AS q3, 4 AS q4));

-- @id: tpcds_107
-- rolling 7-day sum over a mart table
INSERT OVERWRITE TABLE mart.store_sales_rolling
SELECT store_sk,
       dt,
       sum(net_paid) AS net_paid,
       sum(sum(net_paid)) OVER (PARTITION BY store_sk ORDER BY dt ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) AS net_paid_7d
FROM mart.store_sales_daily
GROUP BY store_sk, dt;

-- @id: tpcds_108
-- mart to mart: brand share of the category
INSERT OVERWRITE TABLE mart.brand_share
SELECT b.d_year, b.brand, b.ext_price, b.ext_price / c.total_sales AS share
FROM mart.brand_month_sales b
JOIN mart.category_month_sales c ON b.d_year = c.d_year;

-- @id: tpcds_109
CREATE TABLE mart.returns_partitioned USING delta PARTITIONED BY (dt) AS
SELECT sr_item_sk AS item_sk, sr_ticket_number AS ticket_number, sr_return_amt AS amount, CAST(d_date AS STRING) AS dt
FROM tpcds.store_returns
JOIN tpcds.date_dim ON sr_returned_date_sk = d_date_sk;

-- @id: tpcds_110
CREATE OR REPLACE TABLE mart.promo_calendar USING delta AS
SELECT p.p_promo_id, p.p_promo_name, ds.d_date AS start_date, de.d_date AS end_date, p.p_cost
FROM tpcds.promotion p
JOIN tpcds.date_dim ds ON p.p_start_date_sk = ds.d_date_sk
JOIN tpcds.date_dim de ON p.p_end_date_sk = de.d_date_sk;

-- @id: tpcds_111
-- a CTE that reads another CTE; ORDER BY and LIMIT do not change the lineage
INSERT OVERWRITE TABLE mart.top_states_by_web_sales
WITH by_state AS (
  SELECT ca_state, sum(ws_net_paid) AS paid
  FROM tpcds.web_sales
  JOIN tpcds.customer_address ON ws_bill_addr_sk = ca_address_sk
  GROUP BY ca_state
),
ranked AS (
  SELECT ca_state, paid, paid / sum(paid) OVER () AS share
  FROM by_state
)
SELECT ca_state, paid, share
FROM ranked
ORDER BY paid DESC
LIMIT 10;

-- @id: tpcds_112
-- catalog pages with their call-center sales
INSERT OVERWRITE TABLE mart.catalog_page_sales
SELECT cp.cp_catalog_page_id, cp.cp_department, cc.cc_name, sum(cs.cs_ext_sales_price) AS sales
FROM tpcds.catalog_sales cs
JOIN tpcds.catalog_page cp ON cs.cs_catalog_page_sk = cp.cp_catalog_page_sk
JOIN tpcds.call_center cc ON cs.cs_call_center_sk = cc.cc_call_center_sk
GROUP BY cp.cp_catalog_page_id, cp.cp_department, cc.cc_name;

-- @id: tpcds_113
-- ship modes used per warehouse, as an array
INSERT OVERWRITE TABLE mart.warehouse_ship_modes
SELECT w.w_warehouse_id, collect_set(sm.sm_carrier) AS carriers, count(*) AS shipments
FROM tpcds.web_sales ws
JOIN tpcds.warehouse w ON ws.ws_warehouse_sk = w.w_warehouse_sk
JOIN tpcds.ship_mode sm ON ws.ws_ship_mode_sk = sm.sm_ship_mode_sk
GROUP BY w.w_warehouse_id;

-- @id: tpcds_114
-- household demographics joined twice under different aliases
INSERT OVERWRITE TABLE mart.buyer_vs_shipto_demo
SELECT ws.ws_order_number, bill.hd_buy_potential AS bill_buy_potential, ship.hd_buy_potential AS ship_buy_potential
FROM tpcds.web_sales ws
JOIN tpcds.household_demographics bill ON ws.ws_bill_hdemo_sk = bill.hd_demo_sk
JOIN tpcds.household_demographics ship ON ws.ws_ship_hdemo_sk = ship.hd_demo_sk
WHERE bill.hd_demo_sk <> ship.hd_demo_sk;

-- @id: tpcds_115
-- TPC-DS q73
INSERT INTO mart.small_basket_shoppers
SELECT c_last_name, c_first_name, c_salutation, c_preferred_cust_flag, ss_ticket_number, cnt
FROM (
  SELECT ss_ticket_number, ss_customer_sk, count(*) cnt
  FROM tpcds.store_sales, tpcds.date_dim, tpcds.store, tpcds.household_demographics
  WHERE store_sales.ss_sold_date_sk = date_dim.d_date_sk
    AND store_sales.ss_store_sk = store.s_store_sk
    AND store_sales.ss_hdemo_sk = household_demographics.hd_demo_sk
    AND date_dim.d_dom BETWEEN 1 AND 2
    AND (household_demographics.hd_buy_potential = '>10000' OR household_demographics.hd_buy_potential = 'Unknown')
    AND household_demographics.hd_vehicle_count > 0
    AND date_dim.d_year IN (1999, 2000, 2001)
    AND store.s_county IN ('Williamson County', 'Franklin Parish', 'Bronx County', 'Orange County')
  GROUP BY ss_ticket_number, ss_customer_sk
) dj, tpcds.customer
WHERE ss_customer_sk = c_customer_sk
  AND cnt BETWEEN 1 AND 5;

-- @id: tpcds_116
-- UPDATE SET * / INSERT * match the source's columns to the target's by name
MERGE INTO mart.dim_item AS t
USING (
  SELECT i_item_sk AS item_sk, i_item_id AS item_id, i_product_name AS product_name, i_brand AS brand,
         i_class AS class, i_category AS category, i_current_price AS current_price, i_color AS color
  FROM tpcds.item
  WHERE i_rec_end_date IS NULL
) AS s
ON t.item_sk = s.item_sk
WHEN MATCHED THEN UPDATE SET *
WHEN NOT MATCHED THEN INSERT *;

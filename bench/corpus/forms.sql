-- Statement forms from issue 18 (SQL as people write it), each self-contained. Written after the
-- fixes that made them work, so this file is corpus, not held out; expectations by hand in
-- expected.yaml before the tool was run on it.

-- @id: forms_001
-- a query in parentheses
INSERT INTO mart.forms_paren (SELECT user_id, country FROM dating.user_profile WHERE dt = '2024-05-01');

-- @id: forms_002
CREATE TABLE mart.forms_ctas AS (SELECT user_id, upper(city) AS city_uc FROM dating.user_profile);

-- @id: forms_003
CREATE OR REPLACE VIEW mart.forms_view AS (SELECT user_id, religion FROM dating.user_profile);

-- @id: forms_004
-- VALUES with a scalar subquery: the literal reads nothing, the subquery reads signup_ts
INSERT INTO mart.forms_values (id, latest_signup) VALUES (1, (SELECT max(signup_ts) FROM dating.user_profile));

-- @id: forms_005
-- Hive's FROM-first form over a CTE: q is the CTE, not a table
WITH q AS (SELECT user_id, country FROM dating.user_profile WHERE country = 'NO')
FROM q
INSERT OVERWRITE TABLE mart.forms_norway SELECT user_id, country;

-- @id: forms_006
-- a Hive virtual column: the file a row came from, no column of the table
INSERT OVERWRITE TABLE mart.forms_files SELECT INPUT__FILE__NAME AS source_file, user_id FROM dating.user_profile;

-- @id: forms_007
-- a procedure body holding a write
CREATE PROCEDURE mart.load_forms() BEGIN INSERT INTO mart.forms_proc SELECT user_id, email FROM dating.user_profile; END;

-- The statements below (forms_008 on) were written, with their expectations in expected.yaml,
-- before any tool was run on them.

-- @id: forms_008
-- a clone copies every column of its source
CREATE TABLE mart.forms_clone SHALLOW CLONE mart.forms_paren;

-- @id: forms_009
-- a parenthesised UNION ALL feeding named target columns
INSERT INTO mart.forms_paren (user_id, country)
(SELECT user_id, country FROM dating.user_profile UNION ALL SELECT user_id, country FROM dating.dwd_user_profile);

-- @id: forms_010
-- a CTE reading another CTE, before an INSERT: neither is a table
WITH a AS (SELECT user_id, city FROM dating.user_profile),
     b AS (SELECT user_id, city FROM a WHERE city IS NOT NULL)
INSERT OVERWRITE TABLE mart.forms_ctas SELECT user_id, upper(city) FROM b;

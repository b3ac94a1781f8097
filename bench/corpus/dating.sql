-- Dating-app warehouse: ODS tables and derived dwd_/dws_/ads_/ml_ tables, all in `dating`.
-- Each statement starts with a `-- @id: <id>` line and is self-contained.

-- @id: dating_001
INSERT OVERWRITE TABLE dating.dwd_user_profile PARTITION (dt = '2024-05-01')
SELECT user_id,
       lower(trim(email)) AS email,
       gender,
       interested_in,
       CAST(floor(datediff(DATE '2024-05-01', birth_date) / 365.25) AS INT) AS age,
       upper(country) AS country,
       initcap(city) AS city,
       is_verified,
       signup_ts
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_002
-- one row per interest
INSERT OVERWRITE TABLE dating.dwd_user_interest PARTITION (dt = '2024-05-01')
SELECT user_id, lower(trim(interest)) AS interest
FROM dating.user_profile
LATERAL VIEW explode(interests) t AS interest
WHERE dt = '2024-05-01';

-- @id: dating_003
-- photos with their position; struct fields of the exploded element
INSERT OVERWRITE TABLE dating.dwd_user_photo PARTITION (dt = '2024-05-01')
SELECT user_id, pos AS photo_rank, photo.url AS photo_url, photo.is_primary
FROM dating.user_profile
LATERAL VIEW posexplode(photos) p AS pos, photo
WHERE dt = '2024-05-01';

-- @id: dating_004
-- struct field access
INSERT OVERWRITE TABLE dating.dwd_user_attrs PARTITION (dt = '2024-05-01')
SELECT user_id,
       profile_attrs.height_cm,
       profile_attrs.smoker,
       coalesce(profile_attrs.drinks, 'unknown') AS drinks,
       profile_attrs.education
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_005
INSERT OVERWRITE TABLE dating.dwd_app_event PARTITION (dt = '2024-05-01')
SELECT event_id,
       user_id,
       event_type,
       event_ts,
       e.device.os AS os,
       e.device.app_version AS app_version,
       payload['screen'] AS screen
FROM dating.user_events e
WHERE dt = '2024-05-01'
  AND event_type IS NOT NULL;

-- @id: dating_006
-- map entries as rows
INSERT OVERWRITE TABLE dating.dwd_event_payload PARTITION (dt = '2024-05-01')
SELECT event_id, k AS payload_key, v AS payload_value
FROM dating.user_events
LATERAL VIEW OUTER explode(payload) pl AS k, v
WHERE dt = '2024-05-01';

-- @id: dating_007
-- right swipes are counted, not summed: direction is a condition
INSERT OVERWRITE TABLE dating.dws_swipe_daily PARTITION (dt)
SELECT swiper_id,
       count(*) AS swipes,
       sum(CASE WHEN direction = 'right' THEN 1 ELSE 0 END) AS right_swipes,
       count(DISTINCT swipee_id) AS distinct_targets,
       dt
FROM dating.swipes
WHERE dt >= '2024-04-01'
GROUP BY swiper_id, dt;

-- @id: dating_008
-- mutual right swipes become matches
INSERT INTO dating.dwd_mutual_like
SELECT least(a.swiper_id, a.swipee_id) AS user_a,
       greatest(a.swiper_id, a.swipee_id) AS user_b,
       greatest(a.swipe_ts, b.swipe_ts) AS matched_ts
FROM dating.swipes a
JOIN dating.swipes b
  ON a.swiper_id = b.swipee_id AND a.swipee_id = b.swiper_id
WHERE a.direction = 'right'
  AND b.direction = 'right'
  AND a.swiper_id < a.swipee_id
  AND a.dt = '2024-05-01';

-- @id: dating_009
-- a match counts for both of its users
INSERT OVERWRITE TABLE dating.dws_user_match_stats PARTITION (dt = '2024-05-01')
WITH m AS (
  SELECT user_a AS user_id, match_id, matched_ts, unmatched_ts FROM dating.matches WHERE dt <= '2024-05-01'
  UNION ALL
  SELECT user_b AS user_id, match_id, matched_ts, unmatched_ts FROM dating.matches WHERE dt <= '2024-05-01'
)
SELECT user_id,
       count(*) AS matches,
       sum(CASE WHEN unmatched_ts IS NOT NULL THEN 1 ELSE 0 END) AS unmatches,
       max(matched_ts) AS last_match_ts
FROM m
GROUP BY user_id;

-- @id: dating_010
-- conversation stats per match
INSERT OVERWRITE TABLE dating.dws_conversation PARTITION (dt = '2024-05-01')
SELECT m.match_id,
       m.user_a,
       m.user_b,
       count(msg.message_id) AS messages,
       min(msg.sent_ts) AS first_message_ts,
       (unix_timestamp(min(msg.sent_ts)) - unix_timestamp(m.matched_ts)) / 60 AS minutes_to_first_message,
       sum(CASE WHEN msg.is_flagged THEN 1 ELSE 0 END) AS flagged_messages
FROM dating.matches m
LEFT JOIN dating.messages msg
  ON msg.match_id = m.match_id AND msg.dt = '2024-05-01'
WHERE m.dt <= '2024-05-01'
GROUP BY m.match_id, m.user_a, m.user_b, m.matched_ts;

-- @id: dating_011
-- the moderation queue: one safety log row per new report, evidence built as a struct
INSERT INTO dating.safety_log_tbl PARTITION (dt = '2024-05-01')
SELECT r.report_id AS log_id,
       r.reported_id AS user_id,
       'queued' AS action,
       CAST(NULL AS BIGINT) AS moderator_id,
       r.reason_code AS reason,
       CAST(NULL AS DOUBLE) AS risk_score,
       named_struct('message_id', msg.message_id, 'photo_url', CAST(NULL AS STRING),
                    'text_snippet', substr(msg.body, 1, 200)) AS evidence,
       r.report_ts AS log_ts
FROM dating.reports r
LEFT JOIN dating.messages msg
  ON msg.sender_id = r.reported_id
 AND msg.recipient_id = r.reporter_id
 AND msg.dt = r.dt
WHERE r.dt = '2024-05-01';

-- @id: dating_012
-- the safety training set: one row per user with report, block and message signals
INSERT OVERWRITE TABLE dating.safety_training_tbl PARTITION (dt = '2024-05-01')
WITH rep AS (
  SELECT reported_id AS user_id, count(*) AS report_count
  FROM dating.reports
  WHERE dt BETWEEN '2024-02-01' AND '2024-05-01'
  GROUP BY reported_id
),
blk AS (
  SELECT blocked_id AS user_id, count(*) AS block_count
  FROM dating.blocks
  WHERE dt BETWEEN '2024-02-01' AND '2024-05-01'
  GROUP BY blocked_id
),
msg AS (
  SELECT sender_id AS user_id,
         count(*) AS msg_count,
         sum(CASE WHEN is_flagged THEN 1 ELSE 0 END) AS flagged_msg_count
  FROM dating.messages
  WHERE dt BETWEEN '2024-02-01' AND '2024-05-01'
  GROUP BY sender_id
),
outcome AS (
  SELECT user_id, max(risk_score) AS risk_score,
         max(CASE WHEN action IN ('ban', 'suspend') THEN 1 ELSE 0 END) AS label
  FROM dating.safety_log_tbl
  WHERE dt BETWEEN '2024-02-01' AND '2024-05-01'
  GROUP BY user_id
)
SELECT concat(CAST(p.user_id AS STRING), '-2024-05-01') AS sample_id,
       p.user_id,
       coalesce(o.label, 0) AS label,
       coalesce(rep.report_count, 0) AS report_count,
       coalesce(msg.flagged_msg_count, 0) AS flagged_msg_count,
       coalesce(msg.msg_count, 0) AS msg_count,
       CASE WHEN msg.msg_count > 0 THEN msg.flagged_msg_count / msg.msg_count ELSE 0.0 END AS flag_rate,
       datediff(DATE '2024-05-01', to_date(p.signup_ts)) AS account_age_days,
       p.country,
       CASE WHEN datediff(DATE '2024-05-01', p.birth_date) < 25 * 365 THEN '18-24'
            WHEN datediff(DATE '2024-05-01', p.birth_date) < 35 * 365 THEN '25-34'
            ELSE '35+' END AS age_bucket,
       o.risk_score,
       coalesce(blk.block_count, 0) AS block_count
FROM dating.user_profile p
LEFT JOIN rep ON rep.user_id = p.user_id
LEFT JOIN blk ON blk.user_id = p.user_id
LEFT JOIN msg ON msg.user_id = p.user_id
LEFT JOIN outcome o ON o.user_id = p.user_id
WHERE p.dt = '2024-05-01';

-- @id: dating_013
INSERT OVERWRITE TABLE dating.ads_safety_dashboard PARTITION (dt = '2024-05-01')
SELECT p.country,
       s.action,
       count(*) AS actions,
       count(DISTINCT s.user_id) AS users,
       avg(s.risk_score) AS avg_risk
FROM dating.safety_log_tbl s
JOIN dating.user_profile p ON p.user_id = s.user_id AND p.dt = s.dt
WHERE s.dt = '2024-05-01'
GROUP BY p.country, s.action;

-- @id: dating_014
INSERT OVERWRITE TABLE dating.ads_moderator_workload PARTITION (dt = '2024-05-01')
SELECT m.team,
       m.region,
       m.name AS moderator_name,
       count(*) AS decisions,
       sum(CASE WHEN s.action = 'ban' THEN 1 ELSE 0 END) AS bans,
       percentile_approx(s.risk_score, 0.9) AS p90_risk
FROM dating.safety_log_tbl s
JOIN dating.moderators m ON m.moderator_id = s.moderator_id
WHERE s.dt = '2024-05-01'
GROUP BY m.team, m.region, m.name;

-- @id: dating_015
-- latest risk per user, upserted
MERGE INTO dating.user_risk AS t
USING (
  SELECT user_id, risk_score, action, log_ts
  FROM (
    SELECT user_id, risk_score, action, log_ts,
           row_number() OVER (PARTITION BY user_id ORDER BY log_ts DESC) AS rn
    FROM dating.safety_log_tbl
    WHERE dt = '2024-05-01' AND risk_score IS NOT NULL
  ) x
  WHERE rn = 1
) AS s
ON t.user_id = s.user_id
WHEN MATCHED THEN UPDATE SET
  t.risk_score = s.risk_score,
  t.last_action = s.action,
  t.updated_ts = s.log_ts
WHEN NOT MATCHED THEN INSERT (user_id, risk_score, last_action, updated_ts)
  VALUES (s.user_id, s.risk_score, s.action, s.log_ts);

-- @id: dating_016
-- trust score from blocks and reports received
INSERT OVERWRITE TABLE dating.dws_user_trust PARTITION (dt = '2024-05-01')
SELECT p.user_id,
       coalesce(b.blocks_received, 0) AS blocks_received,
       coalesce(r.reports_received, 0) AS reports_received,
       greatest(0.0, 1.0 - 0.05 * coalesce(b.blocks_received, 0) - 0.1 * coalesce(r.reports_received, 0)) AS trust_score,
       CASE WHEN p.is_verified THEN 'verified' ELSE 'unverified' END AS verification
FROM dating.user_profile p
LEFT JOIN (SELECT blocked_id, count(*) AS blocks_received FROM dating.blocks GROUP BY blocked_id) b
  ON b.blocked_id = p.user_id
LEFT JOIN (SELECT reported_id, count(DISTINCT reporter_id) AS reports_received FROM dating.reports GROUP BY reported_id) r
  ON r.reported_id = p.user_id
WHERE p.dt = '2024-05-01';

-- @id: dating_017
-- revenue in USD
INSERT OVERWRITE TABLE dating.dwd_payment_usd PARTITION (dt = '2024-05-01')
SELECT pay.payment_id,
       pay.user_id,
       pay.sub_id,
       CAST(pay.amount * fx.rate_to_usd AS DECIMAL(12,2)) AS amount_usd,
       pay.method,
       pay.paid_ts
FROM dating.payments pay
JOIN dating.fx_rates fx ON fx.currency = pay.currency AND fx.dt = pay.dt
WHERE pay.dt = '2024-05-01' AND pay.status = 'succeeded';

-- @id: dating_018
CREATE TABLE dating.dws_active_subscriptions USING parquet AS
SELECT s.plan,
       p.country,
       count(*) AS active_subs,
       sum(s.price) AS list_revenue
FROM dating.subscriptions s
JOIN dating.user_profile p ON p.user_id = s.user_id AND p.dt = s.dt
WHERE s.dt = '2024-05-01'
  AND s.status = 'active'
  AND s.end_ts > TIMESTAMP '2024-05-01 00:00:00'
GROUP BY s.plan, p.country;

-- @id: dating_019
-- subscribers whose last payment failed
INSERT OVERWRITE TABLE dating.ads_churn_risk PARTITION (dt = '2024-05-01')
SELECT s.user_id, s.plan, s.end_ts, lp.status AS last_payment_status, lp.paid_ts AS last_payment_ts
FROM dating.subscriptions s
JOIN (
  SELECT user_id, sub_id, status, paid_ts,
         row_number() OVER (PARTITION BY sub_id ORDER BY paid_ts DESC) AS rn
  FROM dating.payments
  WHERE dt <= '2024-05-01'
) lp ON lp.sub_id = s.sub_id AND lp.rn = 1
WHERE s.dt = '2024-05-01'
  AND lp.status <> 'succeeded';

-- @id: dating_020
CREATE OR REPLACE VIEW dating.v_verified_users AS
SELECT * FROM dating.user_profile WHERE is_verified;

-- @id: dating_021
-- model features; religion flows into the feature table
INSERT OVERWRITE TABLE dating.ml_user_features PARTITION (dt = '2024-05-01')
SELECT p.user_id,
       p.gender,
       p.religion,
       size(p.interests) AS interest_count,
       coalesce(sw.right_ratio, 0.0) AS right_swipe_ratio,
       coalesce(ms.matches, 0) AS match_count
FROM dating.user_profile p
LEFT JOIN (
  SELECT swiper_id, avg(CASE WHEN direction = 'right' THEN 1.0 ELSE 0.0 END) AS right_ratio
  FROM dating.swipes
  WHERE dt BETWEEN '2024-04-01' AND '2024-05-01'
  GROUP BY swiper_id
) sw ON sw.swiper_id = p.user_id
LEFT JOIN dating.dws_user_match_stats ms ON ms.user_id = p.user_id AND ms.dt = p.dt
WHERE p.dt = '2024-05-01';

-- @id: dating_022
INSERT OVERWRITE TABLE dating.dws_sender_flag_rate PARTITION (dt = '2024-05-01')
SELECT sender_id, count(*) AS sent, avg(CAST(is_flagged AS INT)) AS flag_rate
FROM dating.messages
WHERE dt = '2024-05-01'
GROUP BY sender_id;

-- @id: dating_023
INSERT OVERWRITE TABLE dating.dwd_user_geo PARTITION (dt = '2024-05-01')
SELECT p.user_id, g.region, g.timezone, coalesce(g.country, p.country) AS country
FROM dating.user_profile p
LEFT JOIN dating.geo_cities g ON lower(g.city) = lower(p.city)
WHERE p.dt = '2024-05-01';

-- @id: dating_024
-- signup funnel
INSERT OVERWRITE TABLE dating.ads_signup_funnel PARTITION (dt = '2024-05-01')
SELECT to_date(p.signup_ts) AS signup_date,
       count(*) AS signups,
       count(fs.swiper_id) AS swiped,
       count(fm.user_id) AS matched,
       count(fmsg.sender_id) AS messaged
FROM dating.user_profile p
LEFT JOIN (SELECT DISTINCT swiper_id FROM dating.swipes) fs ON fs.swiper_id = p.user_id
LEFT JOIN (SELECT user_a AS user_id FROM dating.matches UNION SELECT user_b FROM dating.matches) fm
  ON fm.user_id = p.user_id
LEFT JOIN (SELECT DISTINCT sender_id FROM dating.messages) fmsg ON fmsg.sender_id = p.user_id
WHERE p.dt = '2024-05-01'
GROUP BY to_date(p.signup_ts);

-- @id: dating_025
-- weekly retention cohorts
INSERT OVERWRITE TABLE dating.ads_retention_cohort
SELECT date_trunc('week', p.signup_ts) AS cohort_week,
       floor(datediff(to_date(e.event_ts), to_date(p.signup_ts)) / 7) AS weeks_since_signup,
       count(DISTINCT e.user_id) AS active_users
FROM dating.user_profile p
JOIN dating.user_events e ON e.user_id = p.user_id
WHERE p.dt = '2024-05-01'
  AND e.dt BETWEEN '2024-01-01' AND '2024-05-01'
GROUP BY 1, 2;

-- @id: dating_026
INSERT OVERWRITE TABLE dating.ads_dau PARTITION (dt)
SELECT count(DISTINCT user_id) AS dau, count(*) AS events, dt
FROM dating.user_events
WHERE dt BETWEEN '2024-04-01' AND '2024-05-01'
GROUP BY dt;

-- @id: dating_027
INSERT OVERWRITE TABLE dating.dws_user_event_counts PARTITION (dt = '2024-05-01')
SELECT user_id,
       sum(CASE WHEN event_type = 'open' THEN 1 ELSE 0 END) AS opens,
       sum(CASE WHEN event_type = 'profile_view' THEN 1 ELSE 0 END) AS profile_views,
       sum(CASE WHEN event_type = 'purchase' THEN 1 ELSE 0 END) AS purchases,
       max(event_ts) AS last_event_ts
FROM dating.user_events
WHERE dt = '2024-05-01'
GROUP BY user_id;

-- @id: dating_028
-- sessions: a new session after 30 idle minutes
INSERT OVERWRITE TABLE dating.dwd_user_session PARTITION (dt = '2024-05-01')
SELECT user_id,
       session_no,
       min(event_ts) AS session_start,
       max(event_ts) AS session_end,
       count(*) AS events
FROM (
  SELECT user_id, event_ts,
         sum(new_session) OVER (PARTITION BY user_id ORDER BY event_ts) AS session_no
  FROM (
    SELECT user_id, event_ts,
           CASE WHEN unix_timestamp(event_ts) - unix_timestamp(lag(event_ts) OVER (PARTITION BY user_id ORDER BY event_ts)) > 1800
                  OR lag(event_ts) OVER (PARTITION BY user_id ORDER BY event_ts) IS NULL
                THEN 1 ELSE 0 END AS new_session
    FROM dating.user_events
    WHERE dt = '2024-05-01'
  ) flagged
) numbered
GROUP BY user_id, session_no;

-- @id: dating_029
-- erasure: rewrite the partition without the users who asked to be forgotten
INSERT OVERWRITE TABLE dating.user_profile PARTITION (dt = '2024-05-01')
SELECT user_id, username, email, phone, birth_date, gender, interested_in, country, city, religion, bio,
       signup_ts, is_verified, profile_attrs, interests, photos
FROM dating.user_profile
WHERE dt = '2024-05-01'
  AND user_id NOT IN (SELECT user_id FROM dating.deletion_requests WHERE status = 'approved');

-- @id: dating_030
-- pseudonymised export for a partner
INSERT OVERWRITE TABLE dating.export_partner_users PARTITION (dt = '2024-05-01')
SELECT sha2(concat(CAST(user_id AS STRING), 'pepper-2024'), 256) AS user_key,
       sha2(lower(email), 256) AS email_hash,
       gender,
       year(birth_date) AS birth_year,
       country
FROM dating.user_profile
WHERE dt = '2024-05-01' AND is_verified;

-- @id: dating_031
CREATE TABLE dating.ds_profile_sample USING parquet AS
SELECT user_id, gender, interested_in, country, signup_ts
FROM dating.user_profile TABLESAMPLE (10 PERCENT)
WHERE dt = '2024-05-01';

-- @id: dating_032
INSERT OVERWRITE TABLE dating.dwd_message_features PARTITION (dt = '2024-05-01')
SELECT message_id,
       sender_id,
       length(body) AS body_chars,
       size(split(body, ' ')) AS body_words,
       regexp_extract(body, '(https?://[^ ]+)', 1) AS first_url,
       body RLIKE '[0-9]{7,}' AS has_phone_number
FROM dating.messages
WHERE dt = '2024-05-01';

-- @id: dating_033
INSERT OVERWRITE TABLE dating.ads_report_reasons PARTITION (dt = '2024-05-01')
SELECT reason_code,
       count(*) AS reports,
       count(*) / sum(count(*)) OVER () AS share
FROM dating.reports
WHERE dt = '2024-05-01'
GROUP BY reason_code;

-- @id: dating_034
INSERT OVERWRITE TABLE dating.ads_most_reported PARTITION (dt = '2024-05-01')
SELECT reported_id, reports, rnk
FROM (
  SELECT reported_id, count(*) AS reports, dense_rank() OVER (ORDER BY count(*) DESC) AS rnk
  FROM dating.reports
  WHERE dt BETWEEN '2024-04-01' AND '2024-05-01'
  GROUP BY reported_id
) ranked
WHERE rnk <= 100;

-- @id: dating_035
-- did the other user reply within a day?
INSERT OVERWRITE TABLE dating.dws_first_reply PARTITION (dt = '2024-05-01')
WITH firsts AS (
  SELECT match_id, sender_id, recipient_id, sent_ts,
         row_number() OVER (PARTITION BY match_id ORDER BY sent_ts) AS rn
  FROM dating.messages
  WHERE dt = '2024-05-01'
)
SELECT f.match_id,
       f.sender_id AS opener_id,
       f.sent_ts AS opened_ts,
       min(r.sent_ts) AS replied_ts,
       CASE WHEN min(r.sent_ts) <= f.sent_ts + INTERVAL 1 DAY THEN 1 ELSE 0 END AS replied_within_day
FROM firsts f
LEFT JOIN dating.messages r
  ON r.match_id = f.match_id AND r.sender_id = f.recipient_id AND r.sent_ts > f.sent_ts
WHERE f.rn = 1
GROUP BY f.match_id, f.sender_id, f.sent_ts;

-- @id: dating_036
-- automated detections, with a column list that leaves evidence out
INSERT INTO dating.safety_log_tbl (log_id, user_id, action, moderator_id, reason, risk_score, log_ts, dt)
SELECT message_id + 900000000000 AS log_id,
       sender_id,
       'auto_flag',
       CAST(NULL AS BIGINT),
       'message_flagged',
       0.7,
       sent_ts,
       dt
FROM dating.messages
WHERE dt = '2024-05-01' AND is_flagged;

-- @id: dating_037
-- words of the bio, one row each
INSERT OVERWRITE TABLE dating.dwd_bio_words PARTITION (dt = '2024-05-01')
SELECT user_id, lower(word) AS word
FROM dating.user_profile
LATERAL VIEW explode(split(bio, '\\s+')) w AS word
WHERE dt = '2024-05-01' AND bio IS NOT NULL;

-- @id: dating_038
INSERT OVERWRITE TABLE dating.dwd_negative_signal PARTITION (dt = '2024-05-01')
SELECT reporter_id AS actor_id, reported_id AS target_id, 'report' AS signal, report_ts AS signal_ts
FROM dating.reports
WHERE dt = '2024-05-01'
UNION ALL
SELECT blocker_id, blocked_id, 'block', block_ts
FROM dating.blocks
WHERE dt = '2024-05-01';

-- @id: dating_039
INSERT OVERWRITE TABLE dating.ads_revenue_monthly
SELECT date_format(pu.paid_ts, 'yyyy-MM') AS month,
       s.plan,
       p.country,
       sum(pu.amount_usd) AS revenue_usd,
       count(DISTINCT pu.user_id) AS payers
FROM dating.dwd_payment_usd pu
JOIN dating.subscriptions s ON s.sub_id = pu.sub_id AND s.dt = pu.dt
JOIN dating.user_profile p ON p.user_id = pu.user_id AND p.dt = pu.dt
GROUP BY date_format(pu.paid_ts, 'yyyy-MM'), s.plan, p.country;

-- @id: dating_040
INSERT OVERWRITE TABLE dating.ads_arpu PARTITION (dt = '2024-05-01')
SELECT rev.country, rev.revenue_usd / act.active_users AS arpu
FROM (SELECT p.country, sum(pu.amount_usd) AS revenue_usd
      FROM dating.dwd_payment_usd pu
      JOIN dating.user_profile p ON p.user_id = pu.user_id AND p.dt = pu.dt
      WHERE pu.dt = '2024-05-01'
      GROUP BY p.country) rev
JOIN (SELECT country, count(*) AS active_users
      FROM dating.user_profile
      WHERE dt = '2024-05-01'
      GROUP BY country) act
  ON act.country = rev.country;

-- @id: dating_041
-- plan changes: the next plan of the same user
INSERT OVERWRITE TABLE dating.dwd_plan_change
SELECT user_id, plan AS from_plan, next_plan AS to_plan, next_start AS changed_ts
FROM (
  SELECT user_id, plan, start_ts,
         lead(plan) OVER (PARTITION BY user_id ORDER BY start_ts) AS next_plan,
         lead(start_ts) OVER (PARTITION BY user_id ORDER BY start_ts) AS next_start
  FROM dating.subscriptions
  WHERE dt = '2024-05-01'
) s
WHERE next_plan IS NOT NULL AND next_plan <> plan;

-- @id: dating_042
INSERT OVERWRITE TABLE dating.dws_payment_failures PARTITION (dt = '2024-05-01')
SELECT user_id, method, count(*) AS failures, max(paid_ts) AS last_failure_ts
FROM dating.payments
WHERE dt = '2024-05-01' AND status = 'failed'
GROUP BY user_id, method
HAVING count(*) >= 2;

-- @id: dating_043
INSERT OVERWRITE TABLE dating.dwd_profile_display PARTITION (dt = '2024-05-01')
SELECT user_id,
       if(is_verified, concat(username, ' ✓'), username) AS display_name,
       coalesce(city, country, 'somewhere') AS location
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_044
CREATE OR REPLACE VIEW dating.v_match_overview AS
SELECT m.match_id,
       a.username AS user_a_name,
       b.username AS user_b_name,
       m.matched_ts,
       c.messages,
       c.first_message_ts
FROM dating.matches m
JOIN dating.user_profile a ON a.user_id = m.user_a AND a.dt = m.dt
JOIN dating.user_profile b ON b.user_id = m.user_b AND b.dt = m.dt
LEFT JOIN dating.dws_conversation c ON c.match_id = m.match_id AND c.dt = m.dt;

-- @id: dating_045
MERGE INTO dating.user_daily_stats AS t
USING (
  SELECT e.user_id, e.opens, e.purchases, s.swipes, s.right_swipes
  FROM dating.dws_user_event_counts e
  LEFT JOIN dating.dws_swipe_daily s ON s.user_id = e.user_id AND s.dt = e.dt
  WHERE e.dt = '2024-05-01'
) AS s
ON t.user_id = s.user_id AND t.stat_date = DATE '2024-05-01'
WHEN MATCHED THEN UPDATE SET
  t.opens = s.opens,
  t.purchases = s.purchases,
  t.swipes = coalesce(s.swipes, 0),
  t.right_swipes = coalesce(s.right_swipes, 0)
WHEN NOT MATCHED THEN INSERT (user_id, stat_date, opens, purchases, swipes, right_swipes)
  VALUES (s.user_id, DATE '2024-05-01', s.opens, s.purchases, coalesce(s.swipes, 0), coalesce(s.right_swipes, 0));

-- @id: dating_046
INSERT OVERWRITE TABLE dating.dws_age_gender PARTITION (dt = '2024-05-01')
SELECT CASE WHEN age < 25 THEN '18-24' WHEN age < 35 THEN '25-34' WHEN age < 45 THEN '35-44' ELSE '45+' END AS age_bucket,
       gender,
       count(*) AS users
FROM dating.dwd_user_profile
WHERE dt = '2024-05-01'
GROUP BY 1, 2;

-- @id: dating_047
INSERT OVERWRITE TABLE dating.ml_safety_labels PARTITION (dt = '2024-05-01')
SELECT user_id,
       max(CASE WHEN action IN ('ban', 'suspend') THEN 1 ELSE 0 END) AS label,
       max(log_ts) AS labelled_ts
FROM dating.safety_log_tbl
WHERE dt <= '2024-05-01' AND action <> 'queued'
GROUP BY user_id;

-- @id: dating_048
-- analyst query, no write
SELECT p.country, count(*) AS matches
FROM dating.matches m
JOIN dating.user_profile p ON p.user_id = m.user_a AND p.dt = m.dt
WHERE m.dt = '2024-05-01'
GROUP BY p.country
ORDER BY matches DESC
LIMIT 20;

-- @id: dating_049
SELECT action, moderator_id, count(*) AS n
FROM dating.safety_log_tbl
WHERE dt = '2024-05-01'
GROUP BY action, moderator_id;

-- @id: dating_050
-- three-part target name
INSERT OVERWRITE TABLE spark_catalog.dating.dws_block_daily PARTITION (dt = '2024-05-01')
SELECT blocker_id, count(*) AS blocks, min(block_ts) AS first_block_ts
FROM spark_catalog.dating.blocks
WHERE dt = '2024-05-01'
GROUP BY blocker_id;

-- @id: dating_051
INSERT INTO dating.blocklist_emails
SELECT DISTINCT lower(p.email)
FROM dating.user_profile p JOIN dating.safety_log_tbl s ON s.user_id = p.user_id
WHERE s.action = 'ban';

-- @id: dating_052
INSERT INTO dating.dwd_report_reason SELECT report_id, reason_code, dt FROM dating.reports;

-- @id: dating_053
CREATE TABLE dating.dim_moderator USING parquet AS
SELECT moderator_id, name, team, region FROM dating.moderators;

-- @id: dating_054
CREATE OR REPLACE VIEW dating.v_recent_matches AS
SELECT match_id, user_a, user_b, matched_ts
FROM dating.matches
WHERE dt >= date_format(date_sub(current_date(), 7), 'yyyy-MM-dd');

-- @id: dating_055
-- dormant users: verified, no message sent in the window
INSERT OVERWRITE TABLE dating.ads_dormant_users PARTITION (dt = '2024-05-01')
SELECT p.user_id, p.email, p.signup_ts
FROM dating.user_profile p
WHERE p.dt = '2024-05-01'
  AND p.is_verified
  AND NOT EXISTS (SELECT 1 FROM dating.messages m
                  WHERE m.sender_id = p.user_id AND m.dt BETWEEN '2024-04-01' AND '2024-05-01');

-- @id: dating_056
INSERT OVERWRITE TABLE dating.ads_reported_payers PARTITION (dt = '2024-05-01')
SELECT pay.user_id, sum(pay.amount) AS paid, max(pay.currency) AS currency
FROM dating.payments pay
WHERE pay.dt = '2024-05-01'
  AND pay.user_id IN (SELECT reported_id FROM dating.reports WHERE dt = '2024-05-01')
GROUP BY pay.user_id;

-- @id: dating_057
-- religion by country, suppressed below 50 users
INSERT OVERWRITE TABLE dating.ads_religion_by_country PARTITION (dt = '2024-05-01')
SELECT country, religion, count(*) AS users
FROM dating.user_profile
WHERE dt = '2024-05-01' AND religion IS NOT NULL
GROUP BY country, religion
HAVING count(*) >= 50;

-- @id: dating_058
-- who swipes right on whom, by gender pair
INSERT OVERWRITE TABLE dating.ads_gender_pair_likes PARTITION (dt = '2024-05-01')
SELECT a.gender AS swiper_gender,
       b.gender AS swipee_gender,
       count(*) AS swipes,
       avg(CASE WHEN s.direction = 'right' THEN 1.0 ELSE 0.0 END) AS like_rate
FROM dating.swipes s
JOIN dating.user_profile a ON a.user_id = s.swiper_id AND a.dt = s.dt
JOIN dating.user_profile b ON b.user_id = s.swipee_id AND b.dt = s.dt
WHERE s.dt = '2024-05-01'
GROUP BY a.gender, b.gender;

-- @id: dating_059
-- reply rate: a message counts as replied when the recipient wrote back later in the match
INSERT OVERWRITE TABLE dating.dws_reply_rate PARTITION (dt = '2024-05-01')
WITH sent AS (
  SELECT message_id, match_id, sender_id, recipient_id, sent_ts
  FROM dating.messages
  WHERE dt = '2024-05-01'
),
replied AS (
  SELECT DISTINCT s1.message_id
  FROM sent s1
  JOIN sent s2
    ON s2.match_id = s1.match_id AND s2.sender_id = s1.recipient_id AND s2.sent_ts > s1.sent_ts
)
SELECT s.sender_id,
       count(*) AS sent,
       count(r.message_id) AS replied,
       count(r.message_id) / count(*) AS reply_rate
FROM sent s
LEFT JOIN replied r ON r.message_id = s.message_id
GROUP BY s.sender_id;

-- @id: dating_060
INSERT OVERWRITE TABLE dating.dwd_payment_running PARTITION (dt = '2024-05-01')
SELECT user_id,
       payment_id,
       amount_usd,
       sum(amount_usd) OVER (PARTITION BY user_id ORDER BY paid_ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
         AS cumulative_usd
FROM dating.dwd_payment_usd
WHERE dt <= '2024-05-01';

-- @id: dating_061
INSERT OVERWRITE TABLE dating.dwd_first_plan
SELECT DISTINCT user_id,
       first_value(plan) OVER (PARTITION BY user_id ORDER BY start_ts) AS first_plan,
       first_value(start_ts) OVER (PARTITION BY user_id ORDER BY start_ts) AS first_start_ts
FROM dating.subscriptions;

-- @id: dating_062
MERGE INTO dating.user_profile_latest AS t
USING (SELECT user_id, email, country, city, is_verified FROM dating.user_profile WHERE dt = '2024-05-01') AS s
ON t.user_id = s.user_id
WHEN MATCHED AND (t.email <> s.email OR t.city <> s.city) THEN UPDATE SET
  t.email = s.email, t.country = s.country, t.city = s.city, t.is_verified = s.is_verified
WHEN NOT MATCHED THEN INSERT (user_id, email, country, city, is_verified)
  VALUES (s.user_id, s.email, s.country, s.city, s.is_verified);

-- @id: dating_063
-- nested output: a struct of profile facts per user
CREATE TABLE dating.ml_profile_struct USING parquet AS
SELECT user_id,
       named_struct('gender', gender, 'country', country, 'height', profile_attrs.height_cm) AS facts,
       transform(photos, ph -> ph.url) AS photo_urls
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_064
-- array higher-order function
INSERT OVERWRITE TABLE dating.dwd_interest_norm PARTITION (dt = '2024-05-01')
SELECT user_id, array_distinct(transform(interests, x -> lower(trim(x)))) AS interests_norm
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_065
INSERT OVERWRITE TABLE dating.dwd_primary_photo PARTITION (dt = '2024-05-01')
SELECT user_id, filter(photos, ph -> ph.is_primary)[0].url AS primary_photo_url
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_066
INSERT OVERWRITE TABLE dating.dwd_interest_flags PARTITION (dt = '2024-05-01')
SELECT user_id,
       array_contains(interests, 'hiking') AS likes_hiking,
       array_contains(interests, 'travel') AS likes_travel
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_067
INSERT OVERWRITE TABLE dating.dws_user_recent_reports PARTITION (dt = '2024-05-01')
SELECT reported_id, collect_list(named_struct('reason', reason_code, 'ts', report_ts)) AS recent_reports
FROM dating.reports
WHERE dt BETWEEN '2024-04-24' AND '2024-05-01'
GROUP BY reported_id;

-- @id: dating_068
INSERT OVERWRITE TABLE dating.ads_users_by_region PARTITION (dt = '2024-05-01')
SELECT region, count(*) AS users, count(DISTINCT country) AS countries
FROM dating.dwd_user_geo
WHERE dt = '2024-05-01'
GROUP BY region;

-- @id: dating_069
-- the training join: features plus labels
INSERT OVERWRITE TABLE dating.ml_training_set PARTITION (dt = '2024-05-01')
SELECT f.user_id,
       f.gender,
       f.religion,
       f.interest_count,
       f.right_swipe_ratio,
       f.match_count,
       t.report_count,
       t.flag_rate,
       t.account_age_days,
       l.label
FROM dating.ml_user_features f
JOIN dating.safety_training_tbl t ON t.user_id = f.user_id AND t.dt = f.dt
JOIN dating.ml_safety_labels l ON l.user_id = f.user_id AND l.dt = f.dt
WHERE f.dt = '2024-05-01';

-- @id: dating_070
INSERT INTO dating.ml_risk_scores PARTITION (dt = '2024-05-01')
SELECT user_id,
       'logreg-v3' AS model_version,
       1 / (1 + exp(-(0.3 * report_count + 2.5 * flag_rate + 0.1 * block_count - 0.01 * account_age_days))) AS score
FROM dating.safety_training_tbl
WHERE dt = '2024-05-01';

-- @id: dating_071
DELETE FROM dating.user_events
WHERE user_id IN (SELECT user_id FROM dating.deletion_requests WHERE status = 'approved');

-- @id: dating_072
UPDATE dating.user_risk SET risk_score = 0.0, last_action = 'erased'
WHERE user_id IN (SELECT user_id FROM dating.deletion_requests WHERE status = 'approved');

-- @id: dating_073
-- the daily KPI report: six sources side by side
INSERT OVERWRITE TABLE dating.ads_daily_kpi PARTITION (dt = '2024-05-01')
WITH signups AS (
  SELECT count(*) AS signups
  FROM dating.user_profile
  WHERE dt = '2024-05-01' AND to_date(signup_ts) = DATE '2024-05-01'
),
dau AS (
  SELECT count(DISTINCT user_id) AS dau
  FROM dating.user_events
  WHERE dt = '2024-05-01'
),
swipe AS (
  SELECT count(*) AS swipes, sum(CASE WHEN direction = 'right' THEN 1 ELSE 0 END) AS right_swipes
  FROM dating.swipes
  WHERE dt = '2024-05-01'
),
mat AS (
  SELECT count(*) AS new_matches
  FROM dating.matches
  WHERE dt = '2024-05-01'
),
msg AS (
  SELECT count(*) AS messages, count(DISTINCT match_id) AS active_conversations
  FROM dating.messages
  WHERE dt = '2024-05-01'
),
rev AS (
  SELECT sum(amount_usd) AS revenue_usd
  FROM dating.dwd_payment_usd
  WHERE dt = '2024-05-01'
),
safety AS (
  SELECT sum(CASE WHEN action = 'ban' THEN 1 ELSE 0 END) AS bans,
         avg(risk_score) AS avg_risk_score
  FROM dating.safety_log_tbl
  WHERE dt = '2024-05-01'
)
SELECT signups.signups,
       dau.dau,
       swipe.swipes,
       swipe.right_swipes,
       mat.new_matches,
       msg.messages,
       msg.active_conversations,
       coalesce(rev.revenue_usd, 0) AS revenue_usd,
       safety.bans,
       safety.avg_risk_score,
       rev.revenue_usd / dau.dau AS revenue_per_dau
FROM signups
CROSS JOIN dau
CROSS JOIN swipe
CROSS JOIN mat
CROSS JOIN msg
CROSS JOIN rev
CROSS JOIN safety;

-- @id: dating_074
INSERT OVERWRITE TABLE dating.ads_hourly_activity PARTITION (dt = '2024-05-01')
SELECT hour(event_ts) AS hour_of_day, event_type, count(*) AS events, count(DISTINCT user_id) AS users
FROM dating.user_events
WHERE dt = '2024-05-01'
GROUP BY hour(event_ts), event_type;

-- @id: dating_075
INSERT OVERWRITE TABLE dating.ads_os_share PARTITION (dt = '2024-05-01')
SELECT device.os AS os, count(DISTINCT user_id) AS users
FROM dating.user_events
WHERE dt = '2024-05-01'
GROUP BY device.os;

-- @id: dating_076
INSERT OVERWRITE TABLE dating.ads_reply_latency PARTITION (dt = '2024-05-01')
SELECT percentile_approx(minutes_to_first_message, 0.5) AS p50_minutes,
       percentile_approx(minutes_to_first_message, 0.9) AS p90_minutes,
       avg(minutes_to_first_message) AS avg_minutes
FROM dating.dws_conversation
WHERE dt = '2024-05-01' AND messages > 0;

-- @id: dating_077
INSERT OVERWRITE TABLE dating.ads_match_conversion PARTITION (dt = '2024-05-01')
SELECT a.gender AS gender_a,
       b.gender AS gender_b,
       count(*) AS matches,
       sum(CASE WHEN c.messages > 0 THEN 1 ELSE 0 END) AS conversations
FROM dating.dws_conversation c
JOIN dating.user_profile a ON a.user_id = c.user_a AND a.dt = c.dt
JOIN dating.user_profile b ON b.user_id = c.user_b AND b.dt = c.dt
WHERE c.dt = '2024-05-01'
GROUP BY a.gender, b.gender;

-- @id: dating_078
CREATE OR REPLACE TABLE dating.ads_user_ltv USING delta AS
SELECT user_id, sum(amount_usd) AS ltv_usd, count(*) AS payments, min(paid_ts) AS first_paid_ts
FROM dating.dwd_payment_usd
GROUP BY user_id;

-- @id: dating_079
INSERT OVERWRITE TABLE dating.ads_payment_method_mix PARTITION (dt = '2024-05-01')
SELECT method,
       sum(amount) AS amount,
       sum(amount) / sum(sum(amount)) OVER () AS share
FROM dating.payments
WHERE dt = '2024-05-01' AND status = 'succeeded'
GROUP BY method;

-- @id: dating_080
CREATE TABLE dating.fx_latest USING parquet AS
SELECT currency, rate_to_usd, dt AS rate_date
FROM (
  SELECT currency, rate_to_usd, dt, row_number() OVER (PARTITION BY currency ORDER BY dt DESC) AS rn
  FROM dating.fx_rates
) r
WHERE rn = 1;

-- @id: dating_081
INSERT OVERWRITE TABLE dating.ads_reports_per_1k_messages PARTITION (dt = '2024-05-01')
SELECT p.country,
       1000.0 * count(DISTINCT r.report_id) / count(DISTINCT msg.message_id) AS reports_per_1k
FROM dating.messages msg
JOIN dating.user_profile p ON p.user_id = msg.sender_id AND p.dt = msg.dt
LEFT JOIN dating.reports r ON r.reported_id = msg.sender_id AND r.dt = msg.dt
WHERE msg.dt = '2024-05-01'
GROUP BY p.country;

-- @id: dating_082
-- simple CASE: gender is compared and, in the ELSE branch, also returned
INSERT OVERWRITE TABLE dating.dwd_gender_label PARTITION (dt = '2024-05-01')
SELECT user_id,
       CASE gender WHEN 'f' THEN 'female' WHEN 'm' THEN 'male' ELSE gender END AS gender_label
FROM dating.user_profile
WHERE dt = '2024-05-01';

-- @id: dating_083
INSERT OVERWRITE TABLE dating.ads_weighted_list_revenue PARTITION (dt = '2024-05-01')
SELECT currency,
       sum(CASE WHEN plan = 'gold' THEN price * 2 ELSE price END) AS weighted_revenue
FROM dating.subscriptions
WHERE dt = '2024-05-01'
GROUP BY currency;

-- @id: dating_084
INSERT OVERWRITE TABLE dating.ads_email_domains PARTITION (dt = '2024-05-01')
SELECT regexp_extract(email, '@(.*)$', 1) AS domain, count(*) AS users
FROM dating.user_profile
WHERE dt = '2024-05-01'
GROUP BY regexp_extract(email, '@(.*)$', 1);

-- @id: dating_085
-- latest profile row per user across partitions
INSERT OVERWRITE TABLE dating.dim_user
WITH ranked AS (
  SELECT user_id, username, email, country, city, signup_ts, dt,
         row_number() OVER (PARTITION BY user_id ORDER BY dt DESC) AS rn
  FROM dating.user_profile
)
SELECT user_id, username, email, country, city, signup_ts, dt AS last_seen_dt
FROM ranked
WHERE rn = 1;

-- @id: dating_086
INSERT INTO dating.moderators VALUES (101, 'Ana', 'trust', 'emea'), (102, 'Bo', 'trust', 'apac');

-- @id: dating_087
-- r.* plus one column of the reported user
CREATE TABLE dating.reports_enriched USING parquet AS
SELECT r.*, p.country AS reported_country
FROM dating.reports r
JOIN dating.user_profile p ON p.user_id = r.reported_id AND p.dt = r.dt;

-- @id: dating_088
INSERT OVERWRITE TABLE dating.dwd_active_pairs PARTITION (dt = '2024-05-01')
SELECT DISTINCT sender_id, recipient_id
FROM dating.messages
WHERE dt = '2024-05-01';

-- @id: dating_089
INSERT OVERWRITE TABLE dating.ads_country_gender_cube PARTITION (dt = '2024-05-01')
SELECT country, gender, count(*) AS users, avg(CAST(is_verified AS INT)) AS verified_share
FROM dating.user_profile
WHERE dt = '2024-05-01'
GROUP BY CUBE (country, gender);

-- @id: dating_090
-- a date spine crossed with subscriptions
INSERT OVERWRITE TABLE dating.ads_active_subs_daily
SELECT d.day, s.plan, count(*) AS active_subs
FROM (SELECT explode(sequence(DATE '2024-04-01', DATE '2024-05-01', INTERVAL 1 DAY)) AS day) d
JOIN dating.subscriptions s
  ON s.dt = '2024-05-01' AND to_date(s.start_ts) <= d.day AND to_date(s.end_ts) >= d.day
GROUP BY d.day, s.plan;

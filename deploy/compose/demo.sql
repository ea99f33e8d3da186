-- The quickstart's table (docs/operations.md, "Try it with docker compose").
CREATE DATABASE IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.events
(
    ts DateTime,
    user_id UInt64,
    event String
)
ENGINE = MergeTree
ORDER BY (event, ts);

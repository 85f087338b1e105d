-- The id Kafka gave each source topic this schema stores offsets of (projections/topic_ids.py).
-- A topic deleted and created again under its name gets a new id, and so does every topic of
-- a cluster whose data was reset: stored offsets of the old topic mean nothing on the new one.

CREATE TABLE topic_ids (
    topic    text PRIMARY KEY,
    topic_id text NOT NULL
);

-- Schedules: a task queued on a cron expression read in an IANA zone. Fire times are whole
-- seconds since the epoch (next_fire_at, fire_at), compared as integers on both backends.
-- Each fire time queues at most one task: schedule_fires' key on (schedule, fire time) makes a
-- second insert fail whichever node tries it, and no lock that can expire is involved.

CREATE TABLE schedules (
    id             TEXT PRIMARY KEY,
    owner_id       TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    cron           TEXT NOT NULL,
    timezone       TEXT NOT NULL,
    title          TEXT NOT NULL,
    description    TEXT,
    priority       INTEGER NOT NULL,
    catch_up       TEXT NOT NULL CHECK (catch_up IN ('skip', 'run_once')),
    overlap        TEXT NOT NULL CHECK (overlap IN ('skip_if_active', 'enqueue')),
    enabled        BOOLEAN NOT NULL,
    next_fire_at   BIGINT,
    last_fired_at  TIMESTAMPTZ,
    last_task_id   TEXT,
    skip_noted     TEXT,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

CREATE INDEX schedules_by_agent ON schedules (owner_id, agent_id, created_at);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE enabled;

CREATE TABLE schedule_fires (
    schedule_id  TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    fire_at      BIGINT NOT NULL,
    task_id      TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (schedule_id, fire_at)
);

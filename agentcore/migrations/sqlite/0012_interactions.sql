-- Discord interactions and tool approvals. A task can wait for a person's approval of a tool
-- call ('awaiting_approval'); `approvals` holds each such call with its decision. A connection
-- can carry its application's id and public key (a user's own bot), and the roles allowed to
-- run commands that change something. `interactions` remembers each interaction id for a day,
-- so one Discord delivers twice runs once.
--
-- SQLite cannot change a CHECK constraint in place, and foreign keys cannot be turned off in
-- the migration's transaction: the tasks and the rows that cascade from them (steps, budget
-- holds) are set aside, the table is dropped and created again under its own name (so the
-- children's references still name it), and everything is put back.

CREATE TEMP TABLE saved_tasks AS SELECT * FROM tasks;
CREATE TEMP TABLE saved_steps AS SELECT * FROM task_steps;
CREATE TEMP TABLE saved_holds AS SELECT * FROM budget_holds;

DROP TABLE tasks;

CREATE TABLE tasks (
    id             TEXT PRIMARY KEY,
    owner_id       TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    title          TEXT NOT NULL,
    description    TEXT,
    priority       INTEGER NOT NULL DEFAULT 0,
    status         TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'awaiting_approval', 'complete', 'failed')),
    result         TEXT,
    error          TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    started_at     TEXT,
    completed_at   TEXT,
    lease_owner    TEXT,
    lease_until    TEXT,
    steps          INTEGER NOT NULL DEFAULT 0,
    depth          INTEGER NOT NULL DEFAULT 0,
    created_by_agent TEXT,
    created_by_task  TEXT,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

INSERT INTO tasks (id, owner_id, agent_id, title, description, priority, status, result,
    error, attempts, input_tokens, output_tokens, created_at, updated_at, started_at,
    completed_at, lease_owner, lease_until, steps, depth, created_by_agent, created_by_task)
SELECT id, owner_id, agent_id, title, description, priority, status, result,
    error, attempts, input_tokens, output_tokens, created_at, updated_at, started_at,
    completed_at, lease_owner, lease_until, steps, depth, created_by_agent, created_by_task
FROM saved_tasks;
INSERT INTO task_steps SELECT * FROM saved_steps;
INSERT INTO budget_holds SELECT * FROM saved_holds;
DROP TABLE saved_tasks;
DROP TABLE saved_steps;
DROP TABLE saved_holds;

CREATE INDEX tasks_by_agent_status ON tasks (owner_id, agent_id, status, priority DESC, created_at);
CREATE INDEX tasks_in_progress ON tasks (lease_owner, lease_until) WHERE status = 'in_progress';
CREATE INDEX tasks_by_creator_task ON tasks (created_by_task) WHERE created_by_task IS NOT NULL;
CREATE INDEX tasks_recent_complete ON tasks (owner_id, agent_id, completed_at DESC) WHERE status = 'complete';

ALTER TABLE agents ADD COLUMN approval_tools TEXT NOT NULL DEFAULT '[]';

ALTER TABLE chat_connections ADD COLUMN application_id TEXT;
ALTER TABLE chat_connections ADD COLUMN public_key TEXT;
ALTER TABLE chat_connections ADD COLUMN allowed_role_ids TEXT NOT NULL DEFAULT '[]';

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    owner_id     TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    task_id      TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    -- 'pending' until decided; a timeout is a denial by nobody (decided_by NULL).
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
    decided_by   TEXT,
    decided_at   TEXT,
    expires_at   TEXT NOT NULL,
    -- The outbox row of the message with the buttons, to edit once decided.
    post_id      INTEGER,
    created_at   TEXT NOT NULL,
    UNIQUE (task_id, call_id),
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

CREATE INDEX approvals_due ON approvals (expires_at) WHERE status = 'pending';

CREATE TABLE interactions (
    id           TEXT PRIMARY KEY,
    received_at  TEXT NOT NULL
);

CREATE INDEX interactions_by_age ON interactions (received_at);

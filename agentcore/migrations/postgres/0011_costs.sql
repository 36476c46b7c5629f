-- Costs and budgets. Every model step records the model called and its cost in micro-dollars
-- (1 USD = 1,000,000; 0 and `unpriced` when the model has no price). Budgets are per user and
-- per agent, NULL for none. `budget_spend` sums the settled cost of each agent's calls per
-- calendar month (UTC); its rows outlive the agent, so deleting an agent gives no money back
-- to its owner's budget. `budget_holds` is the worst case of the one model call each task may
-- have in flight, reserved under the user's lock before the call is sent and dropped when it
-- is settled; only holds of tasks still in progress count. `budget_warnings` records the one
-- warning per budget and month.

ALTER TABLE users ADD COLUMN budget_micros BIGINT;
ALTER TABLE agents ADD COLUMN budget_micros BIGINT;

ALTER TABLE task_steps ADD COLUMN model TEXT;
ALTER TABLE task_steps ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE task_steps ADD COLUMN unpriced BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE budget_spend (
    owner_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    month         TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    spent_micros  BIGINT NOT NULL,
    PRIMARY KEY (owner_id, month, agent_id)
);

CREATE TABLE budget_holds (
    task_id     TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    owner_id    TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    micros      BIGINT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX budget_holds_by_owner ON budget_holds (owner_id, agent_id);

CREATE TABLE budget_warnings (
    owner_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scope       TEXT NOT NULL,
    month       TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner_id, scope, month)
);

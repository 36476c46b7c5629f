-- Rate limits shared by every agent on every node (models.rate_limits), counted in the
-- database with its clock.
--
-- `rate_scopes`: one row per limited scope (a provider's name, or `<provider>:<model>`), the
-- row every caller of the scope locks first, holding the provider's own signal (`Retry-After`,
-- a remaining count at 0): no call of the scope goes out before `blocked_until`.
-- `rate_grants`: the calls sent, one row each, kept for one window: the window's requests are
-- the rows, its tokens their sum (the estimate, corrected by the tokens the answer reports).
-- `rate_tickets`: one row per agent and scope: while it waits for a slot, when it began
-- (`since`) and by when it will look again (`back_by`; a caller that has not looked again by
-- then waits no more); when it was last served (`served_at`), remembered two windows.

CREATE TABLE rate_scopes (
    scope         TEXT PRIMARY KEY,
    blocked_until TIMESTAMPTZ
);

CREATE TABLE rate_grants (
    id         TEXT PRIMARY KEY,
    scope      TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    tokens     BIGINT NOT NULL,
    granted_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX rate_grants_by_time ON rate_grants (scope, granted_at);
CREATE INDEX rate_grants_by_agent ON rate_grants (scope, owner_id, agent_id);

CREATE TABLE rate_tickets (
    scope     TEXT NOT NULL,
    owner_id  TEXT NOT NULL,
    agent_id  TEXT NOT NULL,
    since     TIMESTAMPTZ,
    back_by   TIMESTAMPTZ,
    served_at TIMESTAMPTZ,
    PRIMARY KEY (scope, owner_id, agent_id),
    CHECK ((since IS NULL) = (back_by IS NULL))
);

-- OAuth install states that completed an install: a state serves once. Rows past their
-- expiry are deleted when the next state is spent (an expired state no longer verifies).

CREATE TABLE oauth_states_spent (
    id          TEXT PRIMARY KEY,
    expires_at  TEXT NOT NULL
);

-- The outbox worker lists the lanes (owner, channel) that have undelivered posts every time it
-- looks for work. Without this index each listing read every undelivered post's row, payload
-- and all, so its cost grew with the backlog (most of the database time while Discord's rate
-- limits held posts back); with it the listing reads this index alone, and a lane's head post
-- is found by its first entry. `delivered_at` (always NULL here) makes it cover both queries.
CREATE INDEX outbox_lanes ON outbox (owner_id, channel_id, id, delivered_at) WHERE delivered_at IS NULL;

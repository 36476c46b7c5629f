\set a random(1, :agents)
SELECT pg_notify('agentd_wake', 'w1/a' || :a);

\set a random(1, :agents)
SELECT * FROM add_task(md5(random()::text), 'w1', 'a' || :a, 'Task', NULL, 0, now(), 0, NULL, NULL, NULL, NULL, 'task_added', '{}', NULL, 'w1/a' || :a);

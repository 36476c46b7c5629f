\set o random(1, :owners)
BEGIN;
INSERT INTO things (owner_id, body) VALUES ('w' || :o, 'done');
SELECT record_event_old('w' || :o, 'a', 't', 'activity', 1, NULL, now());
SELECT record_event_old('w' || :o, 'a', 't', 'step', 1, NULL, now());
SELECT record_event_old('w' || :o, 'a', 't', 'activity', 2, NULL, now());
COMMIT;

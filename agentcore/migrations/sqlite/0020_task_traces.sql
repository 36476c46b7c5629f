-- Each task is a trace (OpenTelemetry): the W3C trace id (32 lowercase hex digits) and the id
-- of the span its runs hang under (16 hex digits), chosen when the task is added: the span of
-- the request (or schedule look) that added it. Every run, on whichever node, continues it.
-- Null for a task added while tracing was off: each of its runs starts a trace of its own.
ALTER TABLE tasks ADD COLUMN trace_id TEXT;
ALTER TABLE tasks ADD COLUMN parent_span_id TEXT;

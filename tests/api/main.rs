//! One integration-test binary: the real `agentd` over HTTP, and the storage conformance
//! suite, each test on SQLite and on PostgreSQL with a database of its own.

#![allow(clippy::unwrap_used)]

mod fake_discord;
mod fake_models;
mod helpers;
mod outbox;
mod stripe_events;
mod terminal;

mod accounts;
mod activity;
mod agents;
mod backlog;
mod billing;
mod chat;
mod cli;
mod limits;
mod metrics;
mod models;
mod onboarding;
mod openapi;
mod process;
mod runtime;
mod schemathesis;
mod storage;
mod tenancy;

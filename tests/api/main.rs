//! One integration-test binary: the real `agentd` over HTTP, and the storage conformance
//! suite, each test on SQLite and on PostgreSQL with a database of its own.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test harness: a failed set-up step stops the run with its cause"
)]

mod helpers;
mod outbox;
mod terminal;

use support::{fake_discord, fake_models, otlp_receiver, stripe_events};

mod accounts;
mod activity;
mod agents;
mod backlog;
mod backlog_adds;
mod backlog_pages;
mod backup;
mod billing;
mod chat;
mod cli;
mod conditional;
mod dashboard;
mod events;
mod faults;
mod interactions;
mod limits;
mod mcp;
mod metrics;
mod models;
mod nul;
mod onboarding;
mod openapi;
mod process;
mod providers;
mod quotas;
mod ratelimit;
mod read_cache;
mod runtime;
mod schedules;
mod schemathesis;
mod storage;
mod teams;
mod tenancy;
mod triggers;
mod typed_client;
mod webhooks;

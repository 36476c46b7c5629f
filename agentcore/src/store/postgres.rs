//! The production backend: PostgreSQL, shared by any number of `agentd` nodes.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Pool, Postgres, Transaction};

use super::common::sql_store;
use super::rows::{
    self, ActivityRow, AgentRow, ConnectionRow, MappingRow, OutboxRow, TaskRow, UserRow,
};
use super::{
    AgentDecision, Backend, ConnectionRecord, DatabaseUrl, TaskDecision, TaskWrite, UserRecord,
    db_error, sql,
};
use crate::domain::activity::{ActivityEntry, ActivityQuery, NewActivity};
use crate::domain::agent::{Agent, AgentFilter, AgentId, NewAgent};
use crate::domain::chat::{Connection, Mapping, OutboxLane, OutboxPost};
use crate::domain::task::{Task, TaskId, TaskStatus};
use crate::domain::user::UserId;
use crate::error::{Conflict, Error, Resource, Result};

const MAX_CONNECTIONS: u32 = 16;

#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool<Postgres>,
}

impl PostgresStore {
    const BACKEND: Backend = Backend::Postgres;
    const LOCK: &'static str = " FOR UPDATE";

    /// Connects and applies the migrations. Concurrent nodes serialise on sqlx's migration lock.
    pub async fn connect(url: &DatabaseUrl) -> Result<Self> {
        let options = PgConnectOptions::from_str(url.expose())?.application_name("agentd");
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    fn reader(&self) -> &Pool<Postgres> {
        &self.pool
    }

    fn writer(&self) -> &Pool<Postgres> {
        &self.pool
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    async fn close_pools(&self) {
        self.pool.close().await;
    }
}

sql_store!(PostgresStore, Postgres);

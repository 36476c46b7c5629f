//! The [`Store`](super::Store) implementation both backends share.
//!
//! sqlx's traits make code that is generic over the database need a where-clause per function
//! that restates half of sqlx; the SQL and its bindings are identical for both backends anyway.
//! So the implementation is written once here and instantiated per backend with
//! `sql_store!(Type, Database)`. The backend type provides:
//!
//! - `fn reader(&self) -> &Pool<DB>`: the pool for plain reads;
//! - `async fn begin_write(&self) -> Result<Transaction<'static, DB>>`: a transaction that
//!   may write (on SQLite it takes the write lock up front);
//! - `const LOCK: &str`: the suffix that locks a selected row for the transaction.

macro_rules! sql_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> $crate::store::Backend {
                <$store>::BACKEND
            }

            async fn ping(&self) -> Result<()> {
                sqlx::query("SELECT 1").execute(self.reader()).await?;
                Ok(())
            }

            async fn close(&self) {
                self.close_pools().await;
            }

            async fn secret_or_insert(&self, name: &str, candidate: &str) -> Result<String> {
                sqlx::query(sql::INSERT_SECRET)
                    .bind(name)
                    .bind(candidate)
                    .bind($crate::domain::now())
                    .execute(self.writer())
                    .await?;
                let value: String = sqlx::query_scalar(sql::SELECT_SECRET)
                    .bind(name)
                    .fetch_one(self.writer())
                    .await?;
                Ok(value)
            }

            async fn insert_user(&self, user: &UserRecord) -> Result<()> {
                sqlx::query(sql::INSERT_USER)
                    .bind(user.id.as_str())
                    .bind(&user.email)
                    .bind(&user.email_key)
                    .bind(&user.name)
                    .bind(&user.password_hash)
                    .bind(user.token_version)
                    .bind(user.created_at)
                    .execute(self.writer())
                    .await
                    .map_err(|e| {
                        db_error(
                            e,
                            Some(Error::conflict(
                                Conflict::EmailTaken,
                                "An account with this email already exists.",
                            )),
                        )
                    })?;
                Ok(())
            }

            async fn user_by_email_key(&self, email_key: &str) -> Result<Option<UserRecord>> {
                let row: Option<UserRow> = sqlx::query_as(&sql::select_user_by_email())
                    .bind(email_key)
                    .fetch_optional(self.reader())
                    .await?;
                Ok(row.map(UserRecord::from))
            }

            async fn user_by_id(&self, id: &UserId) -> Result<Option<UserRecord>> {
                let row: Option<UserRow> = sqlx::query_as(&sql::select_user_by_id())
                    .bind(id.as_str())
                    .fetch_optional(self.reader())
                    .await?;
                Ok(row.map(UserRecord::from))
            }

            async fn bump_token_version(&self, id: &UserId) -> Result<i64> {
                let version: Option<i64> = sqlx::query_scalar(sql::BUMP_TOKEN_VERSION)
                    .bind(id.as_str())
                    .bind($crate::domain::now())
                    .fetch_optional(self.writer())
                    .await?;
                version.ok_or(Error::Unauthorized)
            }

            async fn insert_agent(
                &self,
                owner: &UserId,
                agent: &NewAgent,
                at: DateTime<Utc>,
                activity: &NewActivity,
                plans: &$crate::domain::billing::Plans,
            ) -> Result<Agent> {
                let mut tx = self.begin_write().await?;
                check_plan(&mut tx, owner, plans).await?;
                write_agent(&mut tx, owner, agent, &agent.id, at, activity).await?;
                let agent = select_agent_in(&mut tx, owner, &agent.id).await?;
                tx.commit().await?;
                Ok(agent)
            }

            async fn insert_agent_with_task(
                &self,
                owner: &UserId,
                agent: &NewAgent,
                agent_activity: &NewActivity,
                task: &Task,
                task_activity: &NewActivity,
                plans: &$crate::domain::billing::Plans,
            ) -> Result<(Agent, Task)> {
                let mut tx = self.begin_write().await?;
                check_plan(&mut tx, owner, plans).await?;
                let taken: Vec<String> = sqlx::query_scalar(sql::AGENT_IDS_LIKE)
                    .bind(owner.as_str())
                    .bind(format!("{}%", agent.id))
                    .fetch_all(&mut *tx)
                    .await?;
                let id = agent.id.first_free(&taken).map_err(Error::internal)?;
                write_agent(&mut tx, owner, agent, &id, task.created_at, agent_activity).await?;
                let task = Task { agent_id: id.clone(), ..task.clone() };
                write_task(&mut tx, owner, &task, task_activity).await?;
                let agent = select_agent_in(&mut tx, owner, &id).await?;
                tx.commit().await?;
                Ok((agent, task))
            }

            async fn apply_billing_event(
                &self,
                event: &$crate::domain::billing::BillingEvent,
                plans: &$crate::domain::billing::Plans,
                at: DateTime<Utc>,
            ) -> Result<$crate::domain::billing::BillingApplied> {
                use $crate::domain::billing::{BillingApplied, BillingChange};
                let mut tx = self.begin_write().await?;
                if let Some(serialize) = <$store>::SERIALIZE_BILLING {
                    sqlx::query(serialize).execute(&mut *tx).await?;
                }
                let recorded = sqlx::query(sql::INSERT_BILLING_EVENT)
                    .bind(&event.id)
                    .bind(&event.kind)
                    .bind(event.created)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if recorded == 0 {
                    return Ok(BillingApplied::Duplicate);
                }
                let applied = match &event.change {
                    BillingChange::Link(link) => link_customer(&mut tx, link, plans, at).await?,
                    BillingChange::Subscription(change) => {
                        apply_subscription(&mut tx, change, event.created, plans, at).await?
                    }
                };
                tx.commit().await?;
                Ok(applied)
            }

            async fn billing(&self, owner: &UserId) -> Result<(String, Option<String>, i64)> {
                let row: Option<(String, Option<String>, i64)> =
                    sqlx::query_as(sql::SELECT_BILLING)
                        .bind(owner.as_str())
                        .fetch_optional(self.reader())
                        .await?;
                row.ok_or(Error::Unauthorized)
            }

            async fn list_agents(
                &self,
                owner: &UserId,
                filter: &AgentFilter,
            ) -> Result<Vec<Agent>> {
                let rows: Vec<AgentRow> = sqlx::query_as(&sql::select_agents())
                    .bind(owner.as_str())
                    .bind(&filter.workspace)
                    .bind(filter.status.map(|s| s.as_str()))
                    .fetch_all(self.reader())
                    .await?;
                rows::convert(rows)
            }

            async fn agent(&self, owner: &UserId, id: &AgentId) -> Result<Agent> {
                let row: Option<AgentRow> = sqlx::query_as(&sql::select_agent())
                    .bind(owner.as_str())
                    .bind(id.as_str())
                    .fetch_optional(self.reader())
                    .await?;
                row.ok_or_else(|| Error::not_found(Resource::Agent, id.as_str()))?.try_into()
            }

            async fn update_agent(
                &self,
                owner: &UserId,
                id: &AgentId,
                decide: AgentDecision<'_>,
            ) -> Result<Agent> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, owner, id).await?;
                let row: AgentRow = sqlx::query_as(&sql::select_agent())
                    .bind(owner.as_str())
                    .bind(id.as_str())
                    .fetch_one(&mut *tx)
                    .await?;
                let current = Agent::try_from(row)?;
                let Some(change) = decide(&current)? else {
                    return Ok(current);
                };
                let next = &change.agent;
                sqlx::query(sql::UPDATE_AGENT)
                    .bind(owner.as_str())
                    .bind(id.as_str())
                    .bind(&next.name)
                    .bind(next.status.as_str())
                    .bind(next.status_before_vacation.map(|s| s.as_str()))
                    .bind(&next.channel)
                    .bind(&next.role_prompt)
                    .bind(next.throttle_seconds)
                    .bind(&next.workspace)
                    .bind(&next.model)
                    .bind(next.updated_at)
                    .execute(&mut *tx)
                    .await?;
                for (nth, entry) in change.activity.iter().enumerate() {
                    insert_activity(&mut tx, owner, id, entry, nth_instant(next.updated_at, nth))
                        .await?;
                }
                if let Some(post) = &change.post {
                    let payload = serde_json::to_string(&post.body).map_err(Error::internal)?;
                    sqlx::query(sql::INSERT_POST_FOR_MAPPING)
                        .bind(owner.as_str())
                        .bind(id.as_str())
                        .bind(&post.nonce)
                        .bind(payload)
                        .bind(next.updated_at)
                        .execute(&mut *tx)
                        .await?;
                }
                // The node running the agent must hear of any move, also away from `active`.
                if next.status == AgentStatus::Active || next.status != current.status {
                    notify(&mut tx, &AgentKey::new(owner.as_str(), id.as_str())).await?;
                }
                tx.commit().await?;
                Ok(change.agent)
            }

            async fn delete_agent(&self, owner: &UserId, id: &AgentId) -> Result<()> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, owner, id).await?;
                sqlx::query(sql::DELETE_AGENT)
                    .bind(owner.as_str())
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                notify(&mut tx, &AgentKey::new(owner.as_str(), id.as_str())).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn insert_task(
                &self,
                owner: &UserId,
                task: &Task,
                activity: &NewActivity,
            ) -> Result<AgentStatus> {
                let mut tx = self.begin_write().await?;
                let status: Option<String> = sqlx::query_scalar(&sql::agent_status(<$store>::LOCK))
                    .bind(owner.as_str())
                    .bind(task.agent_id.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
                let status: AgentStatus = status
                    .ok_or_else(|| Error::not_found(Resource::Agent, task.agent_id.as_str()))?
                    .parse()
                    .map_err(Error::internal)?;
                write_task(&mut tx, owner, task, activity).await?;
                if status == AgentStatus::Active {
                    notify(&mut tx, &AgentKey::new(owner.as_str(), task.agent_id.as_str())).await?;
                }
                tx.commit().await?;
                Ok(status)
            }

            async fn tasks(
                &self,
                owner: &UserId,
                agent: &AgentId,
                status: Option<TaskStatus>,
            ) -> Result<Vec<Task>> {
                let mut conn = self.reader().acquire().await?;
                require_agent(&mut conn, owner, agent, "").await?;
                let rows: Vec<TaskRow> = sqlx::query_as(&sql::select_tasks())
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .bind(status.map(|s| s.as_str()))
                    .fetch_all(&mut *conn)
                    .await?;
                rows::convert(rows)
            }

            async fn task(&self, owner: &UserId, agent: &AgentId, id: &TaskId) -> Result<Task> {
                let mut conn = self.reader().acquire().await?;
                require_agent(&mut conn, owner, agent, "").await?;
                let row: Option<TaskRow> = sqlx::query_as(&sql::select_task(""))
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .bind(id.as_str())
                    .fetch_optional(&mut *conn)
                    .await?;
                row.ok_or_else(|| Error::not_found(Resource::Task, id.as_str()))?.try_into()
            }

            async fn update_task(
                &self,
                owner: &UserId,
                agent: &AgentId,
                id: &TaskId,
                decide: TaskDecision<'_>,
            ) -> Result<Task> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, owner, agent).await?;
                let row: Option<TaskRow> = sqlx::query_as(&sql::select_task(Self::LOCK))
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .bind(id.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
                let current = Task::try_from(
                    row.ok_or_else(|| Error::not_found(Resource::Task, id.as_str()))?,
                )?;
                let change = decide(&current)?;
                let at = $crate::domain::now();
                let written = match change.write {
                    TaskWrite::Delete => {
                        sqlx::query(sql::DELETE_TASK)
                            .bind(owner.as_str())
                            .bind(agent.as_str())
                            .bind(id.as_str())
                            .execute(&mut *tx)
                            .await?;
                        current
                    }
                    TaskWrite::Update(task) => {
                        sqlx::query(sql::UPDATE_TASK)
                            .bind(owner.as_str())
                            .bind(agent.as_str())
                            .bind(id.as_str())
                            .bind(&task.title)
                            .bind(&task.description)
                            .bind(task.priority)
                            .bind(task.status.as_str())
                            .bind(&task.result)
                            .bind(&task.error)
                            .bind(task.attempts)
                            .bind(task.usage.map(|u| u.input_tokens))
                            .bind(task.usage.map(|u| u.output_tokens))
                            .bind(task.updated_at)
                            .bind(task.started_at)
                            .bind(task.completed_at)
                            .execute(&mut *tx)
                            .await?;
                        if task.status == TaskStatus::Queued {
                            notify(&mut tx, &AgentKey::new(owner.as_str(), agent.as_str())).await?;
                        }
                        *task
                    }
                };
                for (nth, entry) in change.activity.iter().enumerate() {
                    insert_activity(&mut tx, owner, agent, entry, nth_instant(at, nth)).await?;
                }
                tx.commit().await?;
                Ok(written)
            }

            async fn activity(
                &self,
                owner: &UserId,
                agent: &AgentId,
                query: &ActivityQuery,
            ) -> Result<Vec<ActivityEntry>> {
                let mut conn = self.reader().acquire().await?;
                require_agent(&mut conn, owner, agent, "").await?;
                let rows: Vec<ActivityRow> = sqlx::query_as(sql::SELECT_ACTIVITY)
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .bind(query.before)
                    .bind(i64::from(query.limit))
                    .fetch_all(&mut *conn)
                    .await?;
                rows::convert(rows)
            }

            async fn log_activity(
                &self,
                owner: &UserId,
                agent: &AgentId,
                entry: &NewActivity,
            ) -> Result<()> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, owner, agent).await?;
                insert_activity(&mut tx, owner, agent, entry, $crate::domain::now()).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn upsert_connection(
                &self,
                owner: &UserId,
                record: &ConnectionRecord,
            ) -> Result<Connection> {
                let c = &record.connection;
                let row: ConnectionRow = sqlx::query_as(sql::UPSERT_CONNECTION)
                    .bind(owner.as_str())
                    .bind(&c.guild_id)
                    .bind(&c.id)
                    .bind(&c.guild_name)
                    .bind(c.kind.as_str())
                    .bind(&record.sealed_token)
                    .bind(c.channel_count)
                    .bind(c.connected_at)
                    .fetch_one(self.writer())
                    .await?;
                row.try_into()
            }

            async fn connections(&self, owner: &UserId) -> Result<Vec<Connection>> {
                let rows: Vec<ConnectionRow> = sqlx::query_as(&sql::select_connections())
                    .bind(owner.as_str())
                    .fetch_all(self.reader())
                    .await?;
                rows::convert(rows)
            }

            async fn connection(&self, owner: &UserId, guild_id: &str) -> Result<ConnectionRecord> {
                let row: Option<ConnectionRow> = sqlx::query_as(&sql::select_connection())
                    .bind(owner.as_str())
                    .bind(guild_id)
                    .fetch_optional(self.reader())
                    .await?;
                row.ok_or_else(|| Error::not_found(Resource::Connection, guild_id))?.try_into()
            }

            async fn set_channel_count(
                &self,
                owner: &UserId,
                guild_id: &str,
                count: i64,
            ) -> Result<()> {
                sqlx::query(sql::UPDATE_CHANNEL_COUNT)
                    .bind(owner.as_str())
                    .bind(guild_id)
                    .bind(count)
                    .execute(self.writer())
                    .await?;
                Ok(())
            }

            async fn delete_connection(&self, owner: &UserId, guild_id: &str) -> Result<()> {
                let done = sqlx::query(sql::DELETE_CONNECTION)
                    .bind(owner.as_str())
                    .bind(guild_id)
                    .execute(self.writer())
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(Error::not_found(Resource::Connection, guild_id));
                }
                Ok(())
            }

            async fn upsert_mapping(&self, owner: &UserId, mapping: &Mapping) -> Result<Mapping> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, owner, &mapping.agent_id).await?;
                let row: MappingRow = sqlx::query_as(sql::UPSERT_MAPPING)
                    .bind(owner.as_str())
                    .bind(mapping.agent_id.as_str())
                    .bind(&mapping.id)
                    .bind(&mapping.guild_id)
                    .bind(&mapping.channel_id)
                    .bind(&mapping.channel_name)
                    .bind(mapping.created_at)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                row.try_into()
            }

            async fn mappings(&self, owner: &UserId) -> Result<Vec<Mapping>> {
                let rows: Vec<MappingRow> = sqlx::query_as(sql::SELECT_MAPPINGS)
                    .bind(owner.as_str())
                    .fetch_all(self.reader())
                    .await?;
                rows::convert(rows)
            }

            async fn delete_mapping(&self, owner: &UserId, agent: &AgentId) -> Result<()> {
                let done = sqlx::query(sql::DELETE_MAPPING)
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .execute(self.writer())
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(Error::not_found(Resource::Mapping, agent.as_str()));
                }
                Ok(())
            }

            async fn outbox_lanes(&self) -> Result<Vec<OutboxLane>> {
                Ok(sqlx::query_as(sql::SELECT_OUTBOX_LANES).fetch_all(self.reader()).await?)
            }

            async fn claim_post(
                &self,
                lane: &OutboxLane,
                node: &str,
                now: DateTime<Utc>,
                lease_until: DateTime<Utc>,
            ) -> Result<Option<OutboxPost>> {
                let row: Option<OutboxRow> = sqlx::query_as(sql::CLAIM_POST)
                    .bind(&lane.owner_id)
                    .bind(&lane.channel_id)
                    .bind(node)
                    .bind(now)
                    .bind(lease_until)
                    .fetch_optional(self.writer())
                    .await?;
                row.map(OutboxPost::try_from).transpose()
            }

            async fn next_post_due(&self, lane: &OutboxLane) -> Result<Option<DateTime<Utc>>> {
                let head: Option<(DateTime<Utc>, Option<DateTime<Utc>>)> =
                    sqlx::query_as(sql::SELECT_HEAD_DUE)
                        .bind(&lane.owner_id)
                        .bind(&lane.channel_id)
                        .fetch_optional(self.reader())
                        .await?;
                Ok(head.map(|(due, lease)| lease.map_or(due, |lease| due.max(lease))))
            }

            async fn finish_post(&self, id: i64, node: &str, message_id: &str) -> Result<bool> {
                let done = sqlx::query(sql::MARK_DELIVERED)
                    .bind(id)
                    .bind(node)
                    .bind(message_id)
                    .bind($crate::domain::now())
                    .execute(self.writer())
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn prune_delivered(&self, before: DateTime<Utc>) -> Result<u64> {
                let done =
                    sqlx::query(sql::PRUNE_DELIVERED).bind(before).execute(self.writer()).await?;
                Ok(done.rows_affected())
            }

            async fn retry_post(
                &self,
                id: i64,
                node: &str,
                next_attempt_at: DateTime<Utc>,
                error: &str,
            ) -> Result<()> {
                sqlx::query(sql::RESCHEDULE_POST)
                    .bind(id)
                    .bind(node)
                    .bind(next_attempt_at)
                    .bind(error)
                    .execute(self.writer())
                    .await?;
                Ok(())
            }

            async fn drop_post(
                &self,
                post: &OutboxPost,
                node: &str,
                activity: &NewActivity,
            ) -> Result<()> {
                let owner = UserId::from_trusted(post.owner_id.clone());
                let mut tx = self.begin_write().await?;
                // Agent first, as every writer does; a deleted agent took its posts with it.
                if lock_agent(&mut tx, &owner, &post.agent_id).await.is_err() {
                    return Ok(());
                }
                let removed = sqlx::query(sql::DELETE_POST)
                    .bind(post.id)
                    .bind(node)
                    .execute(&mut *tx)
                    .await?;
                if removed.rows_affected() > 0 {
                    insert_activity(
                        &mut tx,
                        &owner,
                        &post.agent_id,
                        activity,
                        $crate::domain::now(),
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn heartbeat(
                &self,
                node: &str,
                now: DateTime<Utc>,
                until: DateTime<Utc>,
            ) -> Result<Vec<AgentKey>> {
                let mut tx = self.begin_write().await?;
                sqlx::query(sql::UPSERT_NODE)
                    .bind(node)
                    .bind(now)
                    .bind(until)
                    .execute(&mut *tx)
                    .await?;
                let held: Vec<AgentKey> = sqlx::query_as(sql::RENEW_AGENT_LEASES)
                    .bind(node)
                    .bind(until)
                    .fetch_all(&mut *tx)
                    .await?;
                sqlx::query(sql::RENEW_TASK_LEASES)
                    .bind(node)
                    .bind(until)
                    .execute(&mut *tx)
                    .await?;
                // Nodes silent for an hour are gone; live counting only looks at `alive_until`.
                sqlx::query(sql::FORGET_DEAD_NODES)
                    .bind(now - chrono::Duration::hours(1))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(held)
            }

            async fn backlogs(&self) -> Result<Backlogs> {
                Ok(sqlx::query_as(sql::BACKLOGS).fetch_one(self.reader()).await?)
            }

            async fn runtime_load(&self, now: DateTime<Utc>) -> Result<RuntimeLoad> {
                Ok(sqlx::query_as(sql::RUNTIME_LOAD).bind(now).fetch_one(self.reader()).await?)
            }

            async fn claim_agents(
                &self,
                node: &str,
                now: DateTime<Utc>,
                until: DateTime<Utc>,
                limit: i64,
            ) -> Result<Vec<AgentKey>> {
                Ok(sqlx::query_as(&sql::claim_agents(<$store>::SKIP_LOCKED))
                    .bind(node)
                    .bind(now)
                    .bind(until)
                    .bind(limit)
                    .fetch_all(self.writer())
                    .await?)
            }

            async fn release_agent(&self, agent: &AgentKey, node: &str) -> Result<()> {
                let mut tx = self.begin_write().await?;
                let released = sqlx::query(sql::RELEASE_AGENT)
                    .bind(&agent.owner_id)
                    .bind(&agent.agent_id)
                    .bind(node)
                    .execute(&mut *tx)
                    .await?;
                if released.rows_affected() > 0 {
                    publish(&mut tx, "").await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn release_node(&self, node: &str, now: DateTime<Utc>) -> Result<()> {
                let mut tx = self.begin_write().await?;
                // Agents before tasks, the lock order of every writer.
                sqlx::query(sql::RELEASE_AGENTS_OF_NODE).bind(node).execute(&mut *tx).await?;
                sqlx::query(sql::REQUEUE_TASKS_OF_NODE)
                    .bind(node)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sql::DELETE_NODE).bind(node).execute(&mut *tx).await?;
                publish(&mut tx, "").await?;
                tx.commit().await?;
                Ok(())
            }

            async fn requeue_expired_tasks(&self, now: DateTime<Utc>) -> Result<u64> {
                let done = sqlx::query(sql::REQUEUE_EXPIRED_TASKS)
                    .bind(now)
                    .execute(self.writer())
                    .await?;
                Ok(done.rows_affected())
            }

            async fn claim_task(
                &self,
                agent: &AgentKey,
                node: &str,
                now: DateTime<Utc>,
                until: DateTime<Utc>,
            ) -> Result<Claim> {
                let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
                let mut tx = self.begin_write().await?;
                let Some(run) = lock_agent_run(&mut tx, agent).await? else {
                    return Ok(Claim::Lost);
                };
                if run.status != AgentStatus::Active || run.lease_owner.as_deref() != Some(node) {
                    return Ok(Claim::Lost);
                }
                if let Some(at) = run.next_run_at.filter(|at| *at > now) {
                    return Ok(Claim::Wait(Some(at)));
                }
                let running: Vec<(String, Option<String>, Option<DateTime<Utc>>)> =
                    sqlx::query_as(sql::SELECT_TASKS_IN_PROGRESS)
                        .bind(owner)
                        .bind(id)
                        .fetch_all(&mut *tx)
                        .await?;
                for (task_id, holder, lease_until) in running {
                    match (holder, lease_until) {
                        // Another node still runs it: one task at a time, so wait for it.
                        (Some(holder), Some(lease_until))
                            if holder != node && lease_until >= now =>
                        {
                            return Ok(Claim::Wait(Some(lease_until)));
                        }
                        // Expired, or left behind by this node's own failed write: run it again.
                        _ => {
                            sqlx::query(sql::REQUEUE_TASK)
                                .bind(&task_id)
                                .bind(now)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                }
                let next: Option<TaskRow> = sqlx::query_as(&sql::select_next_task())
                    .bind(owner)
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(next) = next else {
                    tx.commit().await?;
                    return Ok(Claim::Wait(None));
                };
                let mut task = Task::try_from(next)?;
                sqlx::query(sql::START_TASK)
                    .bind(task.id.as_str())
                    .bind(node)
                    .bind(until)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                task.status = TaskStatus::InProgress;
                task.attempts += 1;
                task.started_at = Some(now);
                task.updated_at = now;
                let owner = UserId::from_trusted(owner.to_owned());
                let entry = NewActivity::for_task(
                    Action::TaskStarted,
                    task.id.as_str(),
                    format!("Task '{}' started.", task.title),
                );
                insert_activity(&mut tx, &owner, &task.agent_id, &entry, now).await?;
                tx.commit().await?;
                Ok(Claim::Task(Box::new(ClaimedTask { task, agent: run })))
            }

            async fn finish_task(
                &self,
                agent: &AgentKey,
                task: &TaskId,
                node: &str,
                outcome: &Outcome,
                calls: i32,
            ) -> Result<bool> {
                let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
                let mut tx = self.begin_write().await?;
                let Some(run) = lock_agent_run(&mut tx, agent).await? else { return Ok(false) };
                let current: Option<TaskRow> = sqlx::query_as(&sql::select_task(<$store>::LOCK))
                    .bind(owner)
                    .bind(id)
                    .bind(task.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(current) = current else { return Ok(false) };
                let at = $crate::domain::now();
                let done = finish(&run, &Task::try_from(current)?, outcome, calls, at);
                let written = sqlx::query(sql::FINISH_TASK)
                    .bind(task.as_str())
                    .bind(node)
                    .bind(done.task.status.as_str())
                    .bind(&done.task.result)
                    .bind(&done.task.error)
                    .bind(done.task.attempts)
                    .bind(done.task.usage.map(|u| u.input_tokens))
                    .bind(done.task.usage.map(|u| u.output_tokens))
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
                if written.rows_affected() == 0 {
                    return Ok(false);
                }
                sqlx::query(sql::UPDATE_AGENT_AFTER_TASK)
                    .bind(owner)
                    .bind(id)
                    .bind(done.agent.status.as_str())
                    .bind(done.agent.status_before_vacation.map(|s| s.as_str()))
                    .bind(done.agent.failure_streak)
                    .bind(done.agent.next_run_at)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
                let owner_id = UserId::from_trusted(owner.to_owned());
                for (nth, entry) in done.activity.iter().enumerate() {
                    insert_activity(
                        &mut tx,
                        &owner_id,
                        &done.task.agent_id,
                        entry,
                        nth_instant(at, nth),
                    )
                    .await?;
                }
                for post in &done.posts {
                    let payload = serde_json::to_string(&post.body).map_err(Error::internal)?;
                    sqlx::query(sql::INSERT_POST_FOR_MAPPING)
                        .bind(owner)
                        .bind(id)
                        .bind(&post.nonce)
                        .bind(payload)
                        .bind(at)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(true)
            }

            async fn agents_with_work(
                &self,
                node: &str,
                now: DateTime<Utc>,
            ) -> Result<Vec<AgentKey>> {
                Ok(sqlx::query_as(sql::AGENTS_WITH_WORK)
                    .bind(node)
                    .bind(now)
                    .fetch_all(self.reader())
                    .await?)
            }

            fn listen(
                &self,
                wake: $crate::store::Wake,
                stop: tokio::sync::watch::Receiver<bool>,
            ) -> Option<tokio::task::JoinHandle<()>> {
                self.listener(wake, stop)
            }
        }

        /// Locks the agent row and reads its run state; `None` when the agent is gone.
        async fn lock_agent_run(
            tx: &mut sqlx::Transaction<'static, $db>,
            agent: &AgentKey,
        ) -> Result<Option<AgentRun>> {
            let row: Option<AgentRunRow> = sqlx::query_as(&sql::select_agent_run(<$store>::LOCK))
                .bind(&agent.owner_id)
                .bind(&agent.agent_id)
                .fetch_optional(&mut **tx)
                .await?;
            row.map(AgentRun::try_from).transpose()
        }

        /// Tells every node that the agent may have work, when the transaction commits.
        async fn notify(tx: &mut sqlx::Transaction<'static, $db>, agent: &AgentKey) -> Result<()> {
            publish(tx, &agent.to_payload()).await
        }

        /// Publishes `payload` on the wake-up channel at commit (a no-op without notifications).
        async fn publish(tx: &mut sqlx::Transaction<'static, $db>, payload: &str) -> Result<()> {
            if let Some(statement) = <$store>::NOTIFY {
                sqlx::query(statement).bind(payload).execute(&mut **tx).await?;
            }
            Ok(())
        }

        /// The time of the `nth` entry of one change: a microsecond apart each, so entries keep
        /// their order and paging by `before` never splits a change ambiguously.
        fn nth_instant(at: DateTime<Utc>, nth: usize) -> DateTime<Utc> {
            at + chrono::Duration::microseconds(i64::try_from(nth).unwrap_or(0))
        }

        /// Locks the agent row for the transaction, or fails with `agent_not_found`.
        async fn lock_agent(
            tx: &mut sqlx::Transaction<'static, $db>,
            owner: &UserId,
            id: &AgentId,
        ) -> Result<()> {
            require_agent(&mut **tx, owner, id, <$store>::LOCK).await
        }

        /// Fails with `agent_not_found` unless the owner has this agent; `lock` is appended to
        /// the query (the backend's row lock, or nothing for a plain read).
        async fn require_agent(
            conn: &mut <$db as sqlx::Database>::Connection,
            owner: &UserId,
            id: &AgentId,
            lock: &str,
        ) -> Result<()> {
            let found: Option<i32> = sqlx::query_scalar(&sql::agent_exists(lock))
                .bind(owner.as_str())
                .bind(id.as_str())
                .fetch_optional(&mut *conn)
                .await?;
            found.map(|_| ()).ok_or_else(|| Error::not_found(Resource::Agent, id.as_str()))
        }

        /// Locks the owner's row (so creations of one user queue up) and fails with
        /// `plan_limit_reached` when the plan allows no more agents.
        async fn check_plan(
            tx: &mut sqlx::Transaction<'static, $db>,
            owner: &UserId,
            plans: &$crate::domain::billing::Plans,
        ) -> Result<()> {
            let plan: Option<String> = sqlx::query_scalar(&sql::user_plan(<$store>::LOCK))
                .bind(owner.as_str())
                .fetch_optional(&mut **tx)
                .await?;
            let plan = plan.ok_or(Error::Unauthorized)?;
            let used: i64 = sqlx::query_scalar(sql::COUNT_AGENTS)
                .bind(owner.as_str())
                .fetch_one(&mut **tx)
                .await?;
            let limit = plans.limit(&plan);
            if used >= i64::from(limit) {
                return Err(Error::PlanLimitReached { plan, limit });
            }
            Ok(())
        }

        /// Inserts the agent under `id` with its `agent_created` entry.
        async fn write_agent(
            tx: &mut sqlx::Transaction<'static, $db>,
            owner: &UserId,
            agent: &NewAgent,
            id: &AgentId,
            at: DateTime<Utc>,
            activity: &NewActivity,
        ) -> Result<()> {
            sqlx::query(sql::INSERT_AGENT)
                .bind(owner.as_str())
                .bind(id.as_str())
                .bind(agent.name.as_str())
                .bind(agent.channel.as_str())
                .bind(agent.role_prompt.as_str())
                .bind(agent.throttle_seconds.get())
                .bind(agent.workspace.as_ref().map(|w| w.as_str()))
                .bind(agent.model.as_ref().map(|m| m.as_str()))
                .bind(at)
                .execute(&mut **tx)
                .await
                .map_err(|e| {
                    db_error(
                        e,
                        Some(Error::conflict(
                            Conflict::AgentExists,
                            format!("You already have an agent with id '{id}'."),
                        )),
                    )
                })?;
            insert_activity(tx, owner, id, activity, at).await
        }

        async fn select_agent_in(
            tx: &mut sqlx::Transaction<'static, $db>,
            owner: &UserId,
            id: &AgentId,
        ) -> Result<Agent> {
            let row: AgentRow = sqlx::query_as(&sql::select_agent())
                .bind(owner.as_str())
                .bind(id.as_str())
                .fetch_one(&mut **tx)
                .await?;
            Agent::try_from(row)
        }

        /// Inserts a queued task with its `task_added` entry.
        async fn write_task(
            tx: &mut sqlx::Transaction<'static, $db>,
            owner: &UserId,
            task: &Task,
            activity: &NewActivity,
        ) -> Result<()> {
            sqlx::query(sql::INSERT_TASK)
                .bind(task.id.as_str())
                .bind(owner.as_str())
                .bind(task.agent_id.as_str())
                .bind(&task.title)
                .bind(&task.description)
                .bind(task.priority)
                .bind(task.created_at)
                .execute(&mut **tx)
                .await?;
            insert_activity(tx, owner, &task.agent_id, activity, task.created_at).await
        }

        /// The id of the user `query` finds for `value`.
        async fn find_user(
            tx: &mut sqlx::Transaction<'static, $db>,
            query: &str,
            value: &str,
        ) -> Result<Option<UserId>> {
            let id: Option<String> =
                sqlx::query_scalar(query).bind(value).fetch_optional(&mut **tx).await?;
            Ok(id.map(UserId::from_trusted))
        }

        /// A checkout: the customer (and its subscriptions, including those kept while it was
        /// unknown) now belongs to the first user found; whoever held it before loses it.
        async fn link_customer(
            tx: &mut sqlx::Transaction<'static, $db>,
            link: &$crate::domain::billing::CustomerLink,
            plans: &$crate::domain::billing::Plans,
            at: DateTime<Utc>,
        ) -> Result<$crate::domain::billing::BillingApplied> {
            let mut user = None;
            for id in &link.user_ids {
                user = find_user(tx, sql::USER_ID_BY_ID, id.as_str()).await?;
                if user.is_some() {
                    break;
                }
            }
            if let (None, Some(key)) = (&user, &link.email_key) {
                user = find_user(tx, sql::USER_ID_BY_EMAIL_KEY, key).await?;
            }
            let Some(user) = user else {
                return Ok($crate::domain::billing::BillingApplied::NoUser);
            };
            let previous: Vec<String> = sqlx::query_scalar(sql::CUSTOMER_HOLDERS)
                .bind(&link.customer)
                .bind(user.as_str())
                .fetch_all(&mut **tx)
                .await?;
            for statement in [sql::UNLINK_CUSTOMER, sql::LINK_CUSTOMER, sql::ATTACH_SUBSCRIPTIONS] {
                sqlx::query(statement)
                    .bind(&link.customer)
                    .bind(user.as_str())
                    .execute(&mut **tx)
                    .await?;
            }
            for old in previous {
                recompute_plan(tx, &UserId::from_trusted(old), plans, at).await?;
            }
            let plan = recompute_plan(tx, &user, plans, at).await?;
            Ok($crate::domain::billing::BillingApplied::Applied { user, plan })
        }

        /// A subscription event: ignored when stale, else the subscription's new state, and
        /// its user's plan when the user is known (by customer, else `metadata.user_id`).
        async fn apply_subscription(
            tx: &mut sqlx::Transaction<'static, $db>,
            change: &$crate::domain::billing::SubscriptionChange,
            created: i64,
            plans: &$crate::domain::billing::Plans,
            at: DateTime<Utc>,
        ) -> Result<$crate::domain::billing::BillingApplied> {
            use $crate::domain::billing::{BillingApplied, SubscriptionState};
            let stored: Option<(String, Option<String>, i64, Option<String>)> =
                sqlx::query_as(&sql::select_subscription(<$store>::LOCK))
                    .bind(&change.id)
                    .fetch_optional(&mut **tx)
                    .await?;
            let (previous_plan, previous_user) = match stored {
                Some((status, plan, last_event_created, user)) => {
                    let state = SubscriptionState { status, plan, last_event_created };
                    if state.ignores(created) {
                        return Ok(BillingApplied::Stale);
                    }
                    (state.plan, user.map(UserId::from_trusted))
                }
                None => (None, None),
            };
            let mut user = find_user(tx, sql::USER_ID_BY_CUSTOMER, &change.customer).await?;
            if let (None, Some(hint)) = (&user, &change.user_hint) {
                user = find_user(tx, sql::USER_ID_BY_ID, hint.as_str()).await?;
                if let Some(hinted) = &user {
                    sqlx::query(sql::LINK_CUSTOMER_IF_UNLINKED)
                        .bind(&change.customer)
                        .bind(hinted.as_str())
                        .execute(&mut **tx)
                        .await?;
                }
            }
            let user = user.or_else(|| previous_user.clone());
            sqlx::query(sql::UPSERT_SUBSCRIPTION)
                .bind(&change.id)
                .bind(&change.customer)
                .bind(user.as_ref().map(UserId::as_str))
                .bind(change.status())
                .bind(change.grant(previous_plan.as_deref()))
                .bind(created)
                .bind(at)
                .execute(&mut **tx)
                .await?;
            if let Some(old) = previous_user.filter(|old| Some(old) != user.as_ref()) {
                recompute_plan(tx, &old, plans, at).await?;
            }
            match user {
                Some(user) => {
                    let plan = recompute_plan(tx, &user, plans, at).await?;
                    Ok(BillingApplied::Applied { user, plan })
                }
                None => Ok(BillingApplied::Pending),
            }
        }

        /// Sets the user's plan and subscription status from all their subscriptions.
        async fn recompute_plan(
            tx: &mut sqlx::Transaction<'static, $db>,
            user: &UserId,
            plans: &$crate::domain::billing::Plans,
            at: DateTime<Utc>,
        ) -> Result<String> {
            use $crate::domain::billing::{SubscriptionState, effective_plan};
            let rows: Vec<(String, Option<String>, i64)> = sqlx::query_as(sql::USER_SUBSCRIPTIONS)
                .bind(user.as_str())
                .fetch_all(&mut **tx)
                .await?;
            let states: Vec<SubscriptionState> = rows
                .into_iter()
                .map(|(status, plan, last_event_created)| SubscriptionState {
                    status,
                    plan,
                    last_event_created,
                })
                .collect();
            let (plan, status) = effective_plan(&states, plans);
            sqlx::query(sql::SET_USER_PLAN)
                .bind(user.as_str())
                .bind(&plan)
                .bind(&status)
                .bind(at)
                .execute(&mut **tx)
                .await?;
            Ok(plan)
        }

        async fn insert_activity(
            tx: &mut sqlx::Transaction<'static, $db>,
            owner: &UserId,
            agent: &AgentId,
            entry: &NewActivity,
            at: DateTime<Utc>,
        ) -> Result<()> {
            sqlx::query(sql::INSERT_ACTIVITY)
                .bind(owner.as_str())
                .bind(agent.as_str())
                .bind(entry.action.as_str())
                .bind(&entry.details)
                .bind(&entry.task_id)
                .bind(at)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }
    };
}

pub(super) use sql_store;

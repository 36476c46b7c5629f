//! The backlog counts listing agents shows are kept by the database with every change to a task
//! (migration 13): a property test runs random sequences of every kind of task change (add,
//! retry, delete, claim, finish, fail, crash requeue, node release, approval park and
//! decision, agent delete) and checks after each step that every agent's counts equal what
//! its tasks say. `AGENTD_TEST_SEED=<n>` replays one sequence.

use super::*;
use agentcore::domain::approval::{Approval, ApprovalStatus, Decider, Decision};
use agentcore::domain::chat::NewPost;
use agentcore::domain::message::MessageBody;
use agentcore::domain::runtime::{AgentKey, Claim, Outcome};
use agentcore::domain::task::{BacklogSummary, TaskId};
use agentcore::store::{ApprovalRef, RunRef, Store};

const NODE: &str = "node-a";
/// Sequences per backend, and steps in each.
const SEQUENCES: u64 = 6;
const STEPS: usize = 60;

backend_tests! { store;
    backlog_counts_equal_the_tasks_after_every_kind_of_change,
}

/// SplitMix64: a small, seedable generator, so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Delete,
    Retry,
    Run,
    Complete,
    Fail,
    /// The node stops renewing: leases run out and the heartbeat's sweep requeues.
    Crash,
    /// Leases run out and the agent's next claim requeues its own task first.
    CrashThenClaim,
    /// The node shuts down cleanly and hands its tasks back.
    ReleaseNode,
    Park,
    Approve,
    Deny,
    DeleteAgent,
    /// A person cancels a queued, waiting or running task.
    Cancel,
}

/// The kinds of change; each step draws one of those that have something to act on, as
/// often as it is listed; or, half the time, one of those that has not changed anything yet
/// in this sequence, so that rare kinds (Retry needs a failed task) are not left to chance.
const OPS: [Op; 20] = [
    Op::Add,
    Op::Add,
    Op::Delete,
    Op::Retry,
    Op::Run,
    Op::Run,
    Op::Complete,
    Op::Fail,
    Op::Crash,
    Op::CrashThenClaim,
    Op::ReleaseNode,
    Op::Park,
    Op::Approve,
    Op::Deny,
    Op::DeleteAgent,
    Op::Add,
    Op::Park,
    Op::Approve,
    Op::Deny,
    Op::Cancel,
];

/// One agent under test: its owner and id. Two owners share the id `a`.
struct Subject {
    owner: WorkspaceId,
    id: AgentId,
}

impl Subject {
    fn key(&self) -> AgentKey {
        AgentKey::new(self.owner.as_str(), self.id.as_str())
    }
}

async fn backlog_counts_equal_the_tasks_after_every_kind_of_change(store: TestStore) {
    let seeds: Vec<u64> = match std::env::var("AGENTD_TEST_SEED") {
        Ok(seed) => vec![seed.parse().expect("AGENTD_TEST_SEED is a number")],
        Err(_) => (1..=SEQUENCES).collect(),
    };
    let replay = seeds.len() == 1;
    let mut effective = std::collections::BTreeSet::new();
    for seed in seeds {
        let fresh = crate::helpers::store(store.db.backend).await.expect("a fresh store");
        run_sequence(&fresh, seed, &mut effective).await;
    }
    if !replay {
        let all: std::collections::BTreeSet<String> =
            OPS.iter().map(|op| format!("{op:?}")).collect();
        let idle: Vec<_> = all.difference(&effective).collect();
        assert!(idle.is_empty(), "the sequences never did {idle:?}: change the seeds or steps");
    }
}

/// Runs one sequence; adds to `effective` the kinds of change that changed something.
async fn run_sequence(
    store: &TestStore,
    seed: u64,
    effective: &mut std::collections::BTreeSet<String>,
) {
    let s = store.store.as_ref();
    let (ada, bob) = (user("ada@example.com"), user("bob@example.com"));
    s.insert_user(&ada).await.unwrap();
    s.insert_user(&bob).await.unwrap();
    let subjects = [
        Subject { owner: ada.ws(), id: id("a") },
        Subject { owner: ada.ws(), id: id("b") },
        Subject { owner: bob.ws(), id: id("a") },
    ];
    for subject in &subjects {
        create_active(s, subject).await;
    }
    let mut rng = Rng(seed);
    let (mut done, mut mine) = (Vec::new(), std::collections::BTreeSet::new());
    for step in 0..STEPS {
        let subject = &subjects[rng.below(subjects.len())];
        let has = present(s, subject).await;
        let open: Vec<Op> = OPS.into_iter().filter(|op| applies(*op, &has)).collect();
        let unseen: Vec<Op> =
            open.iter().copied().filter(|op| !mine.contains(&format!("{op:?}"))).collect();
        let op = if !unseen.is_empty() && rng.below(2) == 0 {
            unseen[rng.below(unseen.len())]
        } else {
            open[rng.below(open.len())]
        };
        let before = statuses(s, &subjects).await;
        apply(store, subject, op, &mut rng).await;
        if statuses(s, &subjects).await != before {
            mine.insert(format!("{op:?}"));
        }
        done.push(format!("{op:?} {}/{}", &subject.owner.as_str()[..8], subject.id));
        for subject in &subjects {
            let (shown, counted) = counts(s, subject).await;
            assert_eq!(
                shown, counted,
                "seed {seed}, step {step}: {}'s counts differ from its tasks after {done:?}",
                subject.id
            );
        }
    }
    // A task moved to another agent of its owner, then back with a new status: no operation
    // of the service does either, but the counts follow the tasks whatever changes them.
    let (from, to) = (&subjects[0], &subjects[1]);
    if let Some(task) = s.tasks(&from.owner, &from.id, None).await.unwrap().first() {
        let moves = [
            ("UPDATE tasks SET agent_id = $1 WHERE id = $2", to),
            (
                "UPDATE tasks SET agent_id = $1, status = CASE WHEN status = 'queued' \
                 THEN 'failed' ELSE 'queued' END WHERE id = $2",
                from,
            ),
        ];
        for (sql, destination) in moves {
            store.db.execute(sql, &[destination.id.as_str(), task.id.as_str()]).await;
            for subject in [from, to] {
                let (shown, counted) = counts(s, subject).await;
                assert_eq!(shown, counted, "seed {seed}: {}'s counts after {sql}", subject.id);
            }
        }
    }
    // Nothing is left for agents that are gone, and no row is missing for those that remain.
    let stray = store
        .db
        .count(
            "SELECT COUNT(*) FROM backlog_counts c WHERE NOT EXISTS \
             (SELECT 1 FROM agents a WHERE a.owner_id = c.owner_id AND a.id = c.agent_id)",
            &[],
        )
        .await;
    let missing = store
        .db
        .count(
            "SELECT COUNT(*) FROM agents a WHERE NOT EXISTS (SELECT 1 FROM backlog_counts c \
             WHERE c.owner_id = a.owner_id AND c.agent_id = a.id)",
            &[],
        )
        .await;
    assert_eq!((stray, missing), (0, 0), "seed {seed}");
    effective.extend(mine);
}

/// The statuses the agent has a task in.
async fn present(s: &dyn Store, subject: &Subject) -> Vec<TaskStatus> {
    s.tasks(&subject.owner, &subject.id, None)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.status)
        .collect()
}

/// Whether `op` has something to act on, given the statuses the agent's tasks are in.
fn applies(op: Op, has: &[TaskStatus]) -> bool {
    let any = |status| has.contains(&status);
    match op {
        Op::Delete => has.iter().any(|s| *s != TaskStatus::InProgress),
        Op::Retry => any(TaskStatus::Failed),
        Op::Run => any(TaskStatus::Queued) && !any(TaskStatus::InProgress),
        Op::Complete | Op::Fail | Op::Park => any(TaskStatus::InProgress),
        Op::Approve | Op::Deny => any(TaskStatus::AwaitingApproval),
        Op::Cancel => has.iter().any(|s| !s.is_finished()),
        Op::Add | Op::Crash | Op::CrashThenClaim | Op::ReleaseNode | Op::DeleteAgent => true,
    }
}

/// Every task of the agents, by id, with its status.
async fn statuses(s: &dyn Store, subjects: &[Subject]) -> Vec<(String, TaskStatus)> {
    let mut all = Vec::new();
    for subject in subjects {
        for task in s.tasks(&subject.owner, &subject.id, None).await.unwrap() {
            all.push((task.id.as_str().to_owned(), task.status));
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// The counts as listing and showing the agent report them, and as its tasks say.
async fn counts(s: &dyn Store, subject: &Subject) -> (BacklogSummary, BacklogSummary) {
    let listed = s.list_agents(&subject.owner, &AgentFilter::default()).await.unwrap();
    let listed = listed.into_iter().find(|a| a.id == subject.id).expect("the agent is listed");
    let shown = s.agent(&subject.owner, &subject.id).await.unwrap();
    assert_eq!(listed.backlog_summary, shown.backlog_summary, "list and show agree");
    // The agent view's one statement: the same agent, and every task exactly as read alone.
    let view = |page| s.agent_with_tasks(&subject.owner, &subject.id, page);
    let (viewed, mut view_tasks) = view(None).await.unwrap();
    let mut tasks = s.tasks(&subject.owner, &subject.id, None).await.unwrap();
    view_tasks.sort_by(|a, b| a.id.cmp(&b.id));
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(viewed, shown, "the view's agent is the agent");
    assert_eq!(view_tasks, tasks, "the view's tasks are the agent's tasks");
    // Paged: every unfinished task, and the finished ones up to the limit.
    let finished = |t: &Task| t.status.is_finished();
    let (paged_agent, mut paged) = view(Some((2, None))).await.unwrap();
    paged.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(paged_agent, shown, "the paged view's agent is the agent");
    let unfinished =
        |all: &[Task]| all.iter().filter(|t| !finished(t)).cloned().collect::<Vec<_>>();
    assert_eq!(unfinished(&paged), unfinished(&tasks), "the paged view has every open task");
    let page = paged.iter().filter(|t| finished(t)).count();
    assert_eq!(page, tasks.iter().filter(|t| finished(t)).count().min(2), "the finished page");
    let mut counted = BacklogSummary::default();
    for task in tasks {
        *match task.status {
            TaskStatus::Queued => &mut counted.queued,
            TaskStatus::InProgress => &mut counted.in_progress,
            TaskStatus::AwaitingApproval => &mut counted.awaiting_approval,
            TaskStatus::Complete => &mut counted.complete,
            TaskStatus::Failed => &mut counted.failed,
            TaskStatus::Cancelled => &mut counted.cancelled,
        } += 1;
    }
    (shown.backlog_summary, counted)
}

async fn create_active(s: &dyn Store, subject: &Subject) {
    s.insert_agent(
        &subject.owner,
        &new_agent(subject.id.as_str(), None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    activate(s, subject).await;
}

async fn activate(s: &dyn Store, subject: &Subject) {
    s.update_agent(&subject.owner, &subject.id, &|current| {
        Ok((current.status != AgentStatus::Active).then(|| AgentChange {
            agent: Agent {
                summary: AgentSummary { status: AgentStatus::Active, ..current.summary.clone() },
                ..current.clone()
            },
            activity: vec![],
            post: None,
        }))
    })
    .await
    .unwrap();
}

/// The agent's tasks in one status.
async fn in_status(s: &dyn Store, subject: &Subject, status: TaskStatus) -> Vec<Task> {
    s.tasks(&subject.owner, &subject.id, Some(status)).await.unwrap()
}

fn pick<'a>(rng: &mut Rng, tasks: &'a [Task]) -> Option<&'a Task> {
    (!tasks.is_empty()).then(|| &tasks[rng.below(tasks.len())])
}

/// Applies `op` to the agent, where it has a task to apply it to.
async fn apply(store: &TestStore, subject: &Subject, op: Op, rng: &mut Rng) {
    let s = store.store.as_ref();
    let key = subject.key();
    let running = in_status(s, subject, TaskStatus::InProgress).await.into_iter().next();
    match op {
        Op::Add => {
            let task = task(subject.id.as_str(), "work", rng.below(3) as i32);
            s.insert_task(&subject.owner, &task, &NewActivity::new(Action::TaskAdded, "added"))
                .await
                .unwrap();
        }
        Op::Delete => {
            let mut tasks = s.tasks(&subject.owner, &subject.id, None).await.unwrap();
            tasks.retain(|t| t.status != TaskStatus::InProgress);
            if let Some(task) = pick(rng, &tasks) {
                s.update_task(&subject.owner, &subject.id, &task.id, &|_| {
                    Ok(TaskChange { write: TaskWrite::Delete, activity: vec![], post: None })
                })
                .await
                .unwrap();
            }
        }
        Op::Retry => {
            if let Some(task) = pick(rng, &in_status(s, subject, TaskStatus::Failed).await) {
                s.update_task(&subject.owner, &subject.id, &task.id, &|current| {
                    let next = Task {
                        status: TaskStatus::Queued,
                        error: None,
                        attempts: 0,
                        completed_at: None,
                        ..current.clone()
                    };
                    Ok(TaskChange {
                        write: TaskWrite::Update(Box::new(next)),
                        activity: vec![],
                        post: None,
                    })
                })
                .await
                .unwrap();
            }
        }
        Op::Cancel => {
            let mut tasks = s.tasks(&subject.owner, &subject.id, None).await.unwrap();
            tasks.retain(|t| !t.status.is_finished());
            if let Some(task) = pick(rng, &tasks) {
                s.update_task(&subject.owner, &subject.id, &task.id, &|current| {
                    let next = Task {
                        status: TaskStatus::Cancelled,
                        cancelled_by: Some("ada@example.com".into()),
                        completed_at: Some(agentcore::domain::now()),
                        ..current.clone()
                    };
                    Ok(TaskChange {
                        write: TaskWrite::Update(Box::new(next)),
                        activity: vec![],
                        post: None,
                    })
                })
                .await
                .unwrap();
            }
        }
        Op::Run => {
            if running.is_none() {
                activate(s, subject).await;
                s.claim_agents(NODE, secs(30), 10).await.unwrap();
                if let Claim::Wait(Some(_)) = s.claim_task(&key, NODE, secs(30), 2).await.unwrap() {
                    // The throttle after the last task: let it pass and claim again.
                    store.db.travel(3).await;
                    s.claim_agents(NODE, secs(30), 10).await.unwrap();
                    s.claim_task(&key, NODE, secs(30), 2).await.unwrap();
                }
            }
        }
        Op::Complete | Op::Fail => {
            if let Some(task) = running {
                let outcome = match op {
                    Op::Complete => Outcome::Complete { text: "done".into(), tool_calls: 0 },
                    _ => Outcome::Failed { error: "the model refused".into(), permanent: false },
                };
                s.finish_task(&key, &task.id, NODE, &outcome, 1, None).await.unwrap();
            }
        }
        Op::Crash => {
            store.db.travel(31).await;
            s.requeue_expired_tasks().await.unwrap();
        }
        Op::CrashThenClaim => {
            store.db.travel(31).await;
            s.claim_agents(NODE, secs(30), 10).await.unwrap();
            s.claim_task(&key, NODE, secs(30), 2).await.unwrap();
        }
        Op::ReleaseNode => s.release_node(NODE).await.unwrap(),
        Op::Park => {
            if let Some(task) = running {
                park(s, &key, &task.id).await;
            }
        }
        Op::Approve | Op::Deny => {
            let waiting = in_status(s, subject, TaskStatus::AwaitingApproval).await;
            if let Some(task) = pick(rng, &waiting) {
                let decision =
                    if matches!(op, Op::Approve) { Decision::Approve } else { Decision::Deny };
                let which = ApprovalRef::OfTask {
                    owner: &subject.owner,
                    agent: &subject.id,
                    task: &task.id,
                };
                s.decide_approval(which, decision, &Decider::Owner, agentcore::domain::now())
                    .await
                    .unwrap();
            }
        }
        Op::DeleteAgent => {
            s.delete_agent(&subject.owner, &subject.id).await.unwrap();
            let left = store
                .db
                .count(
                    "SELECT COUNT(*) FROM backlog_counts WHERE owner_id = $1 AND agent_id = $2",
                    &[subject.owner.as_str(), subject.id.as_str()],
                )
                .await;
            assert_eq!(left, 0, "the counts go with the agent");
            create_active(s, subject).await;
        }
    }
}

/// What the approval gate does at a call of a tool that needs approval.
async fn park(s: &dyn Store, key: &AgentKey, task: &TaskId) {
    let at = agentcore::domain::now();
    let approval = Approval {
        id: uuid::Uuid::now_v7().to_string(),
        task_id: task.as_str().to_owned(),
        agent_id: AgentId::parse(&key.agent_id).unwrap(),
        tool: "http_fetch".into(),
        arguments: serde_json::json!({"url": "https://example.com/"}),
        status: ApprovalStatus::Pending,
        decided_by: None,
        decided_at: None,
        expires_at: at + Duration::hours(1),
        created_at: at,
        call_id: uuid::Uuid::now_v7().to_string(),
    };
    let post = NewPost::new(MessageBody::new(Some("May I fetch?".into()), None));
    let run = RunRef { agent: key, task, node: NODE };
    s.park_task(run, None, &approval, 3600.0, &post).await.unwrap();
}

fn secs(seconds: u64) -> StdDuration {
    StdDuration::from_secs(seconds)
}

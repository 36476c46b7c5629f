//! Onboarding templates: a ready agent, with a first task, for the common roles of a company.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::agent::{Agent, AgentId, AgentStatus};
use super::task::Task;
use super::text;

/// Replaced by the company's name in a template's role prompt.
pub const COMPANY: &str = "{company}";

/// A starting point for one role. `role_prompt` names the company through [`COMPANY`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Template {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: Text,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub name: Text,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub description: Text,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub role_prompt: Text,
    /// The chat channel the agent posts to; a name people will recognise in Discord.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub channel: Text,
    pub sample_task: SampleTask,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SampleTask {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub title: Text,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub description: Text,
}

/// Built in as constants, read back by clients.
pub type Text = Cow<'static, str>;

const fn s(text: &'static str) -> Text {
    Cow::Borrowed(text)
}

/// `POST /api/onboarding/setup`'s answer: the agent in brief, and its first task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Onboarded {
    pub agent: OnboardedAgent,
    pub task: Task,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OnboardedAgent {
    pub id: AgentId,
    pub name: String,
    pub status: AgentStatus,
    pub channel: String,
    pub created_at: DateTime<Utc>,
}

impl From<Agent> for OnboardedAgent {
    fn from(agent: Agent) -> Self {
        let agent = agent.summary;
        Self {
            id: agent.id,
            name: agent.name,
            status: agent.status,
            channel: agent.channel,
            created_at: agent.created_at,
        }
    }
}

impl Template {
    /// The role prompt with the company's name in it.
    pub fn role_prompt_for(&self, company: &CompanyName) -> String {
        self.role_prompt.replace(COMPANY, company.as_str())
    }

    /// The id of the first agent made from this template: `<template>-lead`.
    pub fn agent_id(&self) -> String {
        format!("{}-lead", self.id)
    }
}

text::text_newtype!(
    /// The company an onboarded agent works for: 1 to 100 characters on one line.
    CompanyName,
    |v| text::non_blank_line(v, 100)
);

/// The template with this id.
pub fn template(id: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|template| template.id == id)
}

pub static TEMPLATES: [Template; 5] = [
    Template {
        id: s("marketing"),
        name: s("Marketing Lead"),
        description: s(
            "Plans campaigns, writes launch copy and turns product news into posts people read.",
        ),
        role_prompt: s(
            "You are the marketing lead of {company}. You turn what {company} builds into \
messages its customers care about: campaign plans, launch announcements, social posts, newsletter \
sections and landing-page copy.\n\n\
How you work:\n\
- Start from the audience: who they are, what problem they have, and why {company} solves it \
better than what they use today. Say it plainly before you write anything clever.\n\
- Every piece has one goal and one call to action. Name both at the top of your answer.\n\
- Write in {company}'s voice: clear, specific, confident, no hype words (\"revolutionary\", \
\"game-changing\") and no claims you cannot back with a fact from the task.\n\
- When you lack a fact (a price, a date, a metric), leave a visible placeholder like [PRICE] \
instead of inventing one.\n\
- Offer two or three variants for headlines and subject lines, each under 70 characters.\n\
- End with how to measure success: the metric, the target and when to check it.",
        ),
        channel: s("marketing"),
        sample_task: SampleTask {
            title: s("Draft a launch announcement"),
            description: s("Write a short announcement (under 200 words) introducing our newest \
product update to existing customers, with three subject-line options and a one-sentence call \
to action."),
        },
    },
    Template {
        id: s("support"),
        name: s("Support Lead"),
        description: s(
            "Answers customer questions, drafts help-centre articles and spots recurring problems.",
        ),
        role_prompt: s("You are the customer support lead of {company}. You help {company}'s \
customers solve their problems quickly and leave them feeling looked after.\n\n\
How you work:\n\
- Read the question twice. Restate the customer's actual problem in one sentence before \
answering, so a misunderstanding shows early.\n\
- Answer first, then explain. Use numbered steps for anything with more than two actions.\n\
- Be warm and direct; apologise once when {company} got something wrong, never more, and never \
blame the customer.\n\
- Do not promise refunds, dates or features. When a decision belongs to someone else, say who \
decides and what the customer should expect next.\n\
- When the same problem appears more than once, say so and suggest the help-centre article or \
product fix that would prevent it.\n\
- Flag anything about security, billing disputes or legal threats as ESCALATE at the top of \
your answer."),
        channel: s("support"),
        sample_task: SampleTask {
            title: s("Write a help-centre article for password resets"),
            description: s("Write a step-by-step help-centre article explaining how a customer \
resets a forgotten password, what to do when the reset e-mail does not arrive, and when to \
contact support."),
        },
    },
    Template {
        id: s("engineering"),
        name: s("Engineering Lead"),
        description: s("Reviews designs, breaks work into tasks and writes clear technical notes."),
        role_prompt: s("You are the engineering lead of {company}. You help {company}'s team \
ship reliable software: you review designs, break features into tasks, write technical notes \
and think through failure modes before they reach production.\n\n\
How you work:\n\
- State the problem and the constraints before the solution. If the task is ambiguous, list \
your assumptions explicitly.\n\
- Prefer the simplest design that meets the requirements; name what you rejected and why in one \
line each.\n\
- For every design, cover: data and its ownership, failure modes (timeouts, retries, partial \
writes), security (who can call what), how it is tested, and how it is rolled out and back.\n\
- Break work into tasks a person can finish in a day or less, each with a clear definition of \
done.\n\
- Code examples are short, correct and idiomatic; no pseudo-code presented as real code.\n\
- Call out risks and unknowns at the end, ordered by impact."),
        channel: s("engineering"),
        sample_task: SampleTask {
            title: s("Plan the rollout of a new feature"),
            description: s(
                "Write a one-page plan for rolling out a new user-facing feature behind \
a flag: the steps, the metrics to watch, the conditions for rolling back, and the tasks for the \
team in order.",
            ),
        },
    },
    Template {
        id: s("operations"),
        name: s("Operations Lead"),
        description: s(
            "Writes processes and checklists, tracks vendors and keeps the company running smoothly.",
        ),
        role_prompt: s("You are the operations lead of {company}. You keep {company} running \
smoothly: you write processes and checklists, plan recurring work, compare vendors and make sure \
nothing falls between teams.\n\n\
How you work:\n\
- Turn every request into something repeatable: a checklist, a process with an owner for each \
step, or a schedule.\n\
- Be concrete: who does what, by when, with which tool, and how anyone can tell it is done.\n\
- When comparing options (vendors, tools, approaches), use a short table with cost, effort, risk \
and a recommendation.\n\
- Point out single points of failure (one person, one tool, one supplier) and suggest a backup.\n\
- Keep it short. People follow a ten-line checklist; they skim a ten-page manual.\n\
- End with the next three actions and their owners."),
        channel: s("operations"),
        sample_task: SampleTask {
            title: s("Write an onboarding checklist for new hires"),
            description: s("Create a checklist for a new employee's first week: accounts and \
equipment to prepare before day one, who meets them each day, and what they should have done by \
Friday."),
        },
    },
    Template {
        id: s("sales"),
        name: s("Sales Lead"),
        description: s("Researches prospects, writes outreach and prepares calls and proposals."),
        role_prompt: s("You are the sales lead of {company}. You help {company} win and grow \
customers: you research prospects, write outreach, prepare discovery calls and draft proposals.\n\n\
How you work:\n\
- Lead with the prospect's situation, not {company}'s features. Every message should show you \
understand their business in the first two sentences.\n\
- Keep outreach short: under 120 words, one clear ask, no attachments in a first message.\n\
- For calls, prepare five open questions that uncover the problem, its cost, who decides and the \
timeline.\n\
- Handle objections honestly; never invent customers, discounts or capabilities. Use a \
placeholder like [CUSTOMER STORY] where a real example is needed.\n\
- Track next steps: every answer ends with the follow-up action and a suggested date."),
        channel: s("sales"),
        sample_task: SampleTask {
            title: s("Write a first outreach e-mail"),
            description: s(
                "Write a first outreach e-mail to the head of operations at a mid-sized \
company who might benefit from our product, with two subject-line options and a follow-up \
message for one week later.",
            ),
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::agent::{AgentName, ChannelName, RolePrompt};
    use crate::domain::task::{TaskDescription, TaskTitle};

    #[test]
    fn every_template_makes_a_valid_agent_and_task() {
        let company = CompanyName::parse("Acme Robotics").expect("a company name");
        let ids: Vec<&str> = TEMPLATES.iter().map(|t| t.id.as_ref()).collect();
        assert_eq!(ids, ["marketing", "support", "engineering", "operations", "sales"]);
        for t in &TEMPLATES {
            let prompt = t.role_prompt_for(&company);
            assert!(prompt.contains("Acme Robotics") && !prompt.contains(COMPANY), "{}", t.id);
            RolePrompt::parse(&prompt).expect("a valid role prompt");
            AgentId::parse(&t.agent_id()).expect("a valid agent id");
            AgentName::parse(&t.name).expect("a valid name");
            ChannelName::parse(&t.channel).expect("a valid channel");
            TaskTitle::parse(&t.sample_task.title).expect("a valid title");
            TaskDescription::parse(&t.sample_task.description).expect("a valid description");
            assert_eq!(template(&t.id), Some(t));
        }
        assert_eq!(template("legal"), None);
        assert!(CompanyName::parse("").is_err() && CompanyName::parse(&"x".repeat(101)).is_err());
    }
}

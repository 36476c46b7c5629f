//! `agentctl schedules`: an agent's recurring tasks. Next runs are shown in the schedule's
//! own zone (what was configured), with UTC beside them in `show`.

use agentcore::api::{CreateScheduleRequest, UpdateScheduleRequest};

use super::Context;
use crate::cli::SchedulesCommand;
use crate::client::Client;
use crate::failure::Failure;
use crate::render::View;

pub(crate) async fn run(
    cx: &Context,
    client: &Client,
    command: SchedulesCommand,
) -> Result<(), Failure> {
    let (answer, view) = match command {
        SchedulesCommand::Add {
            agent,
            cron,
            title,
            timezone,
            description,
            priority,
            catch_up,
            overlap,
            disabled,
        } => {
            let request = CreateScheduleRequest {
                cron: Some(cron),
                timezone,
                title: Some(title),
                description,
                priority,
                catch_up,
                overlap,
                enabled: Some(!disabled),
            };
            (client.add_schedule(&agent, &request).await?.answer, View::Schedule)
        }
        SchedulesCommand::List { agent } => {
            (client.schedules(&agent).await?.answer, View::Schedules)
        }
        SchedulesCommand::Show { agent, schedule } => {
            (client.schedule(&agent, &schedule).await?.answer, View::Schedule)
        }
        SchedulesCommand::Update {
            agent,
            schedule,
            cron,
            timezone,
            title,
            description,
            priority,
            catch_up,
            overlap,
            enable,
            disable,
        } => {
            let request = UpdateScheduleRequest {
                cron,
                timezone,
                title,
                description: description.map(|d| if d.is_empty() { None } else { Some(d) }),
                priority,
                catch_up,
                overlap,
                enabled: match (enable, disable) {
                    (true, _) => Some(true),
                    (_, true) => Some(false),
                    _ => None,
                },
            };
            (client.update_schedule(&agent, &schedule, &request).await?.answer, View::Schedule)
        }
        SchedulesCommand::Delete { agent, schedule } => {
            cx.confirm(&format!("Delete schedule {schedule}? Tasks it queued stay."))?;
            (client.delete_schedule(&agent, &schedule).await?.answer, View::Fields)
        }
    };
    cx.emit(&answer, view)
}

//! `agentctl schedules`: an agent's recurring tasks. Next runs are shown in the schedule's
//! own zone (what was configured), with UTC beside them in `show`.

use agentcore::api::{CreateScheduleRequest, UpdateScheduleRequest};

use super::Context;
use crate::cli::SchedulesCommand;
use crate::client::Client;
use crate::failure::Failure;

pub(crate) async fn run(
    cx: &Context,
    client: &Client,
    command: SchedulesCommand,
) -> Result<(), Failure> {
    match command {
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
            cx.emit(&client.add_schedule(&agent, &request).await?)
        }
        SchedulesCommand::List { agent } => cx.emit(&client.schedules(&agent).await?),
        SchedulesCommand::Show { agent, schedule } => {
            cx.emit(&client.schedule(&agent, &schedule).await?)
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
            cx.emit(&client.update_schedule(&agent, &schedule, &request).await?)
        }
        SchedulesCommand::Delete { agent, schedule } => {
            cx.confirm(&format!("Delete schedule {schedule}? Tasks it queued stay."))?;
            cx.emit(&client.delete_schedule(&agent, &schedule).await?)
        }
    }
}

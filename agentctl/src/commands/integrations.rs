//! `agentctl webhooks` and `agentctl triggers`: the workspace's outbound endpoints with their
//! deliveries, and the signed URLs that queue tasks on agents. A secret is printed once, in
//! the answer that made it, with a line (on stderr) saying it will not be shown again.

use agentcore::api::{
    CreateTriggerRequest, CreateWebhookRequest, UpdateTriggerRequest, UpdateWebhookRequest,
};

use super::{Context, clearable};
use crate::cli::{TriggersCommand, WebhooksCommand};
use crate::client::Client;
use crate::failure::Failure;
use crate::render::list_items;

pub(crate) async fn webhooks(
    cx: &Context,
    client: &Client,
    command: WebhooksCommand,
) -> Result<(), Failure> {
    match command {
        WebhooksCommand::List => cx.emit(&client.webhooks().await?),
        WebhooksCommand::Add { url, events, description } => {
            let request = CreateWebhookRequest {
                url: Some(url),
                events: Some(list_items(&events)),
                description,
            };
            cx.emit(&client.create_webhook(&request).await?)?;
            shown_once("Receivers verify deliveries with it (Standard Webhooks).");
            Ok(())
        }
        WebhooksCommand::Show { id } => cx.emit(&client.webhook(&id).await?),
        WebhooksCommand::Update { id, url, events, description, enable, disable } => {
            let request = UpdateWebhookRequest {
                url,
                events: events.map(|all| list_items(&all)),
                description,
                enabled: switch(enable, disable),
            };
            if request.url.is_none()
                && request.events.is_none()
                && request.description.is_none()
                && request.enabled.is_none()
            {
                return Err(Failure::usage(
                    "nothing to change: give --url, --events, --description, --enable or --disable",
                ));
            }
            cx.emit(&client.update_webhook(&id, &request).await?)
        }
        WebhooksCommand::Remove { id } => {
            cx.confirm(&format!("Delete endpoint {id} and its deliveries?"))?;
            cx.emit(&client.delete_webhook(&id).await?)
        }
        WebhooksCommand::Rotate { id } => {
            cx.emit(&client.rotate_webhook_secret(&id).await?)?;
            shown_once("The previous secret signs beside it until previous_valid_until.");
            Ok(())
        }
        WebhooksCommand::Test { id } => cx.emit(&client.test_webhook(&id).await?),
        WebhooksCommand::Deliveries { id, limit, before } => {
            cx.emit(&client.webhook_deliveries(&id, limit, before).await?)
        }
        WebhooksCommand::Redeliver { id, delivery } => {
            cx.emit(&client.redeliver_webhook(&id, &delivery).await?)
        }
    }
}

pub(crate) async fn triggers(
    cx: &Context,
    client: &Client,
    command: TriggersCommand,
) -> Result<(), Failure> {
    match command {
        TriggersCommand::List { agent } => cx.emit(&client.triggers(agent).await?),
        TriggersCommand::Add { agent, title, name, description, priority, disabled } => {
            let request = CreateTriggerRequest {
                agent: Some(agent),
                name,
                title: Some(title),
                description,
                priority,
                enabled: Some(!disabled),
            };
            cx.emit(&client.add_trigger(&request).await?)?;
            shown_once("Callers sign each call with it (Standard Webhooks).");
            Ok(())
        }
        TriggersCommand::Show { id } => cx.emit(&client.trigger(&id).await?),
        TriggersCommand::Update { id, name, title, description, priority, enable, disable } => {
            let request = UpdateTriggerRequest {
                name,
                title,
                description: description.map(clearable),
                priority,
                enabled: switch(enable, disable),
            };
            if request.name.is_none()
                && request.title.is_none()
                && request.description.is_none()
                && request.priority.is_none()
                && request.enabled.is_none()
            {
                return Err(Failure::usage(
                    "nothing to change: give --name, --title, --description, --priority, \
                     --enable or --disable",
                ));
            }
            cx.emit(&client.update_trigger(&id, &request).await?)
        }
        TriggersCommand::Remove { id } => {
            cx.confirm(&format!("Delete trigger {id}? Calls to its URL are refused from now on."))?;
            cx.emit(&client.delete_trigger(&id).await?)
        }
        TriggersCommand::Rotate { id } => {
            cx.emit(&client.rotate_trigger_secret(&id).await?)?;
            shown_once("The previous secret stays valid until previous_valid_until.");
            Ok(())
        }
    }
}

/// `--enable` / `--disable` as the field they set.
fn switch(enable: bool, disable: bool) -> Option<bool> {
    match (enable, disable) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// The note beside a printed secret, on stderr so that a script reading stdout gets the
/// answer alone.
fn shown_once(use_: &str) {
    eprintln!("The secret is shown only this once: keep it now. {use_}");
}

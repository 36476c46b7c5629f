//! How commands move an agent between statuses. Pure: the store applies the result under a lock.

use super::activity::{Action, NewActivity};
use super::agent::AgentStatus;

/// What a caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCommand {
    /// `POST .../start`: `active` from any state; ends vacation and clears `error`.
    Start,
    /// `POST .../stop`: `idle`; a task in progress finishes, no new one is taken.
    Stop,
    /// `POST .../vacation`: `None` toggles, `Some(on)` sets.
    Vacation(Option<bool>),
    /// `PATCH` with `status`: set directly.
    Set(AgentStatus),
}

/// The status fields after a command, and the entry to log when something changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub status: AgentStatus,
    pub status_before_vacation: Option<AgentStatus>,
    pub activity: Option<NewActivity>,
}

impl Transition {
    pub fn changed(&self) -> bool {
        self.activity.is_some()
    }
}

/// Applies `command` to an agent whose status is `current`, remembering `before_vacation`.
pub fn transition(
    current: AgentStatus,
    before_vacation: Option<AgentStatus>,
    command: StatusCommand,
) -> Transition {
    let unchanged =
        Transition { status: current, status_before_vacation: before_vacation, activity: None };
    let to =
        |status: AgentStatus, remembered: Option<AgentStatus>, action: Action, details: String| {
            Transition {
                status,
                status_before_vacation: remembered,
                activity: Some(NewActivity::new(action, details)),
            }
        };
    let on_vacation = current == AgentStatus::Vacation;
    match command {
        StatusCommand::Start if current == AgentStatus::Active => unchanged,
        StatusCommand::Start => to(
            AgentStatus::Active,
            None,
            Action::AgentStarted,
            format!("Agent started (was {current})."),
        ),
        StatusCommand::Stop if current == AgentStatus::Idle => unchanged,
        StatusCommand::Stop => to(
            AgentStatus::Idle,
            None,
            Action::AgentStopped,
            format!("Agent stopped (was {current}); it takes no new tasks."),
        ),
        StatusCommand::Vacation(None | Some(true)) if !on_vacation => to(
            AgentStatus::Vacation,
            Some(current),
            Action::VacationStarted,
            format!("Vacation started (was {current}); no new tasks until it ends."),
        ),
        StatusCommand::Vacation(None | Some(false)) if on_vacation => {
            let restored = match before_vacation {
                Some(AgentStatus::Active) => AgentStatus::Active,
                _ => AgentStatus::Idle,
            };
            to(
                restored,
                None,
                Action::VacationEnded,
                format!("Vacation ended; status is {restored} again."),
            )
        }
        StatusCommand::Vacation(_) => unchanged,
        StatusCommand::Set(status) if status == current => unchanged,
        StatusCommand::Set(status) => to(
            status,
            (status == AgentStatus::Vacation).then_some(current),
            Action::StatusChanged,
            format!("Status changed from {current} to {status}."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::AgentStatus::*;
    use super::*;

    fn after(
        current: AgentStatus,
        before: Option<AgentStatus>,
        command: StatusCommand,
    ) -> (AgentStatus, Option<AgentStatus>, Option<Action>) {
        let t = transition(current, before, command);
        (t.status, t.status_before_vacation, t.activity.map(|a| a.action))
    }

    #[test]
    fn start_makes_any_agent_active_and_forgets_vacation() {
        for from in [Idle, Vacation, Error] {
            assert_eq!(
                after(from, Some(Idle), StatusCommand::Start),
                (Active, None, Some(Action::AgentStarted))
            );
        }
        assert_eq!(after(Active, None, StatusCommand::Start), (Active, None, None));
    }

    #[test]
    fn stop_makes_any_agent_idle() {
        for from in [Active, Vacation, Error] {
            assert_eq!(
                after(from, None, StatusCommand::Stop),
                (Idle, None, Some(Action::AgentStopped))
            );
        }
        assert_eq!(after(Idle, None, StatusCommand::Stop), (Idle, None, None));
    }

    #[test]
    fn vacation_toggles_and_restores_active_or_idle() {
        let toggle = StatusCommand::Vacation(None);
        assert_eq!(
            after(Active, None, toggle),
            (Vacation, Some(Active), Some(Action::VacationStarted))
        );
        assert_eq!(
            after(Vacation, Some(Active), toggle),
            (Active, None, Some(Action::VacationEnded))
        );
        assert_eq!(after(Vacation, Some(Idle), toggle), (Idle, None, Some(Action::VacationEnded)));
        assert_eq!(
            after(Error, None, toggle),
            (Vacation, Some(Error), Some(Action::VacationStarted))
        );
        assert_eq!(after(Vacation, Some(Error), toggle), (Idle, None, Some(Action::VacationEnded)));
        assert_eq!(after(Vacation, None, toggle), (Idle, None, Some(Action::VacationEnded)));
    }

    #[test]
    fn explicit_vacation_settings_are_idempotent() {
        assert_eq!(
            after(Vacation, Some(Active), StatusCommand::Vacation(Some(true))),
            (Vacation, Some(Active), None)
        );
        assert_eq!(after(Idle, None, StatusCommand::Vacation(Some(false))), (Idle, None, None));
        assert_eq!(after(Idle, None, StatusCommand::Vacation(Some(true))).0, Vacation);
        assert_eq!(after(Vacation, Some(Active), StatusCommand::Vacation(Some(false))).0, Active);
    }

    #[test]
    fn setting_a_status_directly_logs_a_status_change() {
        assert_eq!(
            after(Idle, None, StatusCommand::Set(Active)),
            (Active, None, Some(Action::StatusChanged))
        );
        assert_eq!(
            after(Active, None, StatusCommand::Set(Vacation)),
            (Vacation, Some(Active), Some(Action::StatusChanged))
        );
        assert_eq!(
            after(Vacation, Some(Active), StatusCommand::Set(Error)),
            (Error, None, Some(Action::StatusChanged))
        );
        assert_eq!(after(Error, None, StatusCommand::Set(Error)), (Error, None, None));
    }
}

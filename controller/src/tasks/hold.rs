//! Why a target's automatic work is held now: a suspension in force that does not allow the
//! type, or maintenance windows that are closed (or cannot be read). The triggers ask before
//! submitting, so that a held target gets no new automatic task at all; the task queue applies
//! the same rules to the tasks that exist ([`super::lifecycle`]).

use jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;

use groundskeeper_api::maintenance_suspension::{MaintenanceSuspension, Suspension, in_force};
use groundskeeper_api::maintenance_task::{TaskTarget, TaskType};
use groundskeeper_api::maintenance_window::{WindowState, Windows};

use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};

/// Why automatic work of `task_type` may not be submitted on the target now, and when that may
/// change (`None`: only when something changes); `None` when it may.
pub fn automatic_hold(
    suspensions: &[Suspension],
    windows: Option<&std::result::Result<Windows, String>>,
    task_type: &TaskType,
    now: Timestamp,
) -> Option<(String, Option<Timestamp>)> {
    if let Some(suspension) = suspensions.iter().find(|s| !s.allows(task_type)) {
        return Some((suspension.describe(), suspension.until));
    }
    match windows? {
        Err(why) => Some((format!("its maintenance windows cannot be read: {why}"), None)),
        Ok(windows) => match windows.state_at(now) {
            WindowState::Open { .. } => None,
            WindowState::Closed { opens } => Some((
                format!("outside its maintenance windows: the next opens {} ({opens})", windows.local(opens)),
                Some(opens),
            )),
        },
    }
}

/// The suspensions of `target` in force at `now`. One that cannot be used (no reason, an end
/// before its making) suspends nothing and is logged, naming the field.
pub async fn suspensions_of(
    ctx: &Context,
    namespace: &str,
    target: &TaskTarget,
    now: Timestamp,
) -> Result<Vec<Suspension>> {
    let api: Api<MaintenanceSuspension> = Api::namespaced(ctx.client.clone(), namespace);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("list MaintenanceSuspensions in {namespace}")))?;
    let (active, errors) = in_force(&listed.items, target, now);
    for error in errors {
        tracing::warn!(%error, "a MaintenanceSuspension that cannot be used suspends nothing");
    }
    Ok(active)
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::maintenance_window::MaintenanceWindowsSpec;

    #[test]
    fn a_suspension_or_a_closed_window_holds_automatic_work() {
        let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
        let freeze = Suspension {
            name: "freeze".into(),
            reason: "incident".into(),
            by: "alice".into(),
            until: Some("2026-11-24T14:00:00Z".parse().unwrap()),
            allow: vec![TaskType::Snapshot],
            stop_running: false,
        };
        let (why, until) =
            automatic_hold(std::slice::from_ref(&freeze), None, &TaskType::Maintenance, now).unwrap();
        assert!(why.contains("suspended by alice"), "{why}");
        assert_eq!(until, freeze.until);
        assert_eq!(automatic_hold(&[freeze], None, &TaskType::Snapshot, now), None);
        let spec = MaintenanceWindowsSpec { time_zone: "UTC".into(), windows: vec!["* 01:00-05:00".into()] };
        let windows = Windows::new(&spec).map_err(|e| format!("{e:?}"));
        let (why, opens) = automatic_hold(&[], Some(&windows), &TaskType::Cleanup, now).unwrap();
        assert!(
            why.contains("outside its maintenance windows: the next opens Wed 2026-11-25 01:00 UTC"),
            "{why}"
        );
        assert_eq!(opens, Some("2026-11-25T01:00:00Z".parse().unwrap()));
        assert_eq!(automatic_hold(&[], None, &TaskType::Cleanup, now), None);
    }
}

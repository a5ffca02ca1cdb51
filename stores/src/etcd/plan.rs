//! What to defragment, in which order, and whether it is safe to go on: pure functions of the
//! members' observed status, shared by `groundskeeper-job defrag` and the controller.
//!
//! The rules (see `docs/protocol.md`, "etcd"):
//! * a member is defragmented when its db is at least `min_defrag_bytes` AND at least
//!   `max_fragmented_percent` of it is free pages, and under a `NOSPACE` alarm whatever its size;
//! * only when every member is healthy and there are at least 3 voting members (a defrag blocks
//!   its member: with fewer, one blocked member can stall the cluster);
//! * never a learner (it does not serve the client traffic that benefits, and promotion races);
//! * followers first, the leader last; at the leader's turn, leadership goes first to a healthy,
//!   caught-up follower or stays, by [`super::leader_turn`];
//! * before every member: all members healthy and agreeing on one leader, and the member within
//!   `max_apply_lag` entries of the leader (a member behind may be catching up from a snapshot,
//!   which a defrag must not overlap on the versions of [`super::versions::defrag_risk`]).

use std::cmp::Reverse;
use std::time::Duration;

use groundskeeper_protocol::operation::LeaderTurnPolicy;

use super::leader_turn::{DEFAULT_IN_PLACE_BUDGET, TurnChoice};
use super::versions::defrag_risk;

/// Which revision to compact to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactTarget {
    RetainRevisions(i64),
    Revision(i64),
}

/// Defaults from the OpenShift design: 100 MB and 45 %.
pub const DEFAULT_MIN_DEFRAG_BYTES: i64 = 100_000_000;
pub const DEFAULT_MAX_FRAGMENTED_PERCENT: f64 = 45.0;
/// A follower this many raft entries or fewer behind the leader's commit index counts as caught
/// up. Leadership transfer waits for the transferee anyway; this only keeps us from picking a
/// follower that is far behind (it would stall the transfer until its timeout).
pub const DEFAULT_MAX_APPLY_LAG: u64 = 100;
/// Fewer voting members than this and one blocked member can cost the quorum.
pub const MIN_VOTING_MEMBERS: usize = 3;

/// A member without defragmentation history is expected to defragment at this rate (50 MiB/s, a
/// quarter of the ~200 MB/s measured in `docs/benchmarks.md` and reported by users).
pub const DEFAULT_DEFRAG_BYTES_PER_SECOND: f64 = 50.0 * 1024.0 * 1024.0;

/// How late into a window a member too long for it as a whole may still start as the first of a
/// run (5 minutes): see [`defer_past_window`].
pub const LATE_START_SLACK_SECONDS: i64 = 300;

/// Why a member of `db_size` bytes, expected to defragment at `rate` bytes per second, may not
/// start at `now` with the maintenance window ending at `not_after`; `None` when it fits. A member
/// expected to take longer than the whole window (from `opened`, less
/// [`LATE_START_SLACK_SECONDS`]) may start when it is the `first` of its run while the window is
/// still open, so that it is never left out for ever; once `not_after` has passed, nothing starts.
pub fn defer_past_window(
    db_size: i64,
    rate: f64,
    now: jiff::Timestamp,
    not_after: jiff::Timestamp,
    opened: Option<jiff::Timestamp>,
    first: bool,
) -> Option<String> {
    let rate = if rate.is_finite() && rate > 0.0 { rate } else { DEFAULT_DEFRAG_BYTES_PER_SECOND };
    let expected = (db_size.max(0) as f64 / rate).ceil().max(1.0) as i64;
    let left = not_after.duration_since(now).as_secs();
    let longer_than_window = opened.is_some_and(|opened| {
        expected > not_after.duration_since(opened).as_secs() - LATE_START_SLACK_SECONDS
    });
    // Once the window has closed nothing starts, not even a member the window was too short for.
    let still_open = left > 0;
    (expected > left && !(first && longer_than_window && still_open)).then(|| {
        format!(
            "left for the next maintenance window: expected {expected}s ({db_size} bytes at {:.1} MiB/s), \
             the window ends in {}s (at {not_after})",
            rate / (1024.0 * 1024.0),
            left.max(0)
        )
    })
}

/// When a member is worth defragmenting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefragPolicy {
    /// Act only on a db at least this large (bytes).
    pub min_defrag_bytes: i64,
    /// Act only when at least this share of the db (percent, 0–100) is free pages.
    pub max_fragmented_percent: f64,
}

impl Default for DefragPolicy {
    fn default() -> Self {
        Self {
            min_defrag_bytes: DEFAULT_MIN_DEFRAG_BYTES,
            max_fragmented_percent: DEFAULT_MAX_FRAGMENTED_PERCENT,
        }
    }
}

/// How the run may proceed, beyond the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Whether leadership moves away before the leader's defrag ([`super::leader_turn`]).
    pub leader_turn: LeaderTurnPolicy,
    /// `Auto`: in place when the leader's predicted defrag takes at most this long.
    pub in_place_budget: Duration,
    /// Accept clusters with fewer than [`MIN_VOTING_MEMBERS`] voting members.
    pub allow_single_member: bool,
    /// See [`DEFAULT_MAX_APPLY_LAG`].
    pub max_apply_lag: u64,
    /// Skip the members whose version can corrupt data when a defrag overlaps a snapshot apply
    /// ([`super::versions::defrag_risk`]), instead of defragmenting them once caught up.
    pub refuse_affected_versions: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            leader_turn: LeaderTurnPolicy::Auto,
            in_place_budget: DEFAULT_IN_PLACE_BUDGET,
            allow_single_member: false,
            max_apply_lag: DEFAULT_MAX_APPLY_LAG,
            refuse_affected_versions: false,
        }
    }
}

/// What one member's `Status` said. Sizes in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberStatus {
    pub db_size: i64,
    pub db_size_in_use: i64,
    /// Id of the leader as this member sees it; 0 when it knows none.
    pub leader: u64,
    pub raft_term: u64,
    pub raft_index: u64,
    pub raft_applied_index: u64,
    /// etcd's `errors` field: alarms and the like.
    pub errors: Vec<String>,
    /// The server's version (`3.5.17`); empty when unknown.
    pub version: String,
    /// `Status.dbSizeQuota` (bytes; 0 when not reported). Right only from etcd 3.6.6
    /// ([`super::versions::trusted_quota`]).
    pub db_size_quota: i64,
}

/// One member as observed: from the member list, plus its `Status` when it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberObservation {
    pub id: u64,
    pub name: String,
    pub is_learner: bool,
    /// `Err` holds why the member could not be asked (unreachable, TLS, timeout).
    pub status: Result<MemberStatus, String>,
}

impl MemberObservation {
    /// The member's id as etcdctl prints it.
    pub fn id_hex(&self) -> String {
        format!("{:x}", self.id)
    }

    /// `None` when healthy, else why not.
    pub fn unhealthy_because(&self) -> Option<String> {
        let status = match &self.status {
            Ok(status) => status,
            Err(err) => return Some(format!("unreachable: {err}")),
        };
        if status.leader == 0 {
            return Some("sees no leader".into());
        }
        // A NOSPACE alarm is what defragmentation cures, so it does not count against health;
        // any other alarm (CORRUPT) or error does.
        let other_errors: Vec<&str> =
            status.errors.iter().map(String::as_str).filter(|e| !is_nospace_alarm(e)).collect();
        if !other_errors.is_empty() {
            return Some(format!("reports errors: {}", other_errors.join("; ")));
        }
        None
    }
}

/// etcd renders alarms in `Status.errors` as `memberID:<id> alarm:NOSPACE`.
pub fn is_nospace_alarm(error: &str) -> bool {
    error.contains("NOSPACE")
}

/// Share of the db (percent) that is free pages, which a defrag gives back.
pub fn fragmented_percent(status: &MemberStatus) -> f64 {
    if status.db_size <= 0 {
        return 0.0;
    }
    let free = (status.db_size - status.db_size_in_use).max(0);
    free as f64 * 100.0 / status.db_size as f64
}

/// Free pages below this are too few to tell a defrag from noise by the sizes alone.
pub const MIN_EVIDENT_FREE_BYTES: i64 = 1 << 20;

/// Whether a member's sizes show that a defrag ran between `before` and `after`: its free pages
/// (db size − in use) fell to at most half. Writes after the defrag free pages again, but far
/// more slowly than a defrag gives them back, so half is a wide margin either way. With fewer
/// than [`MIN_EVIDENT_FREE_BYTES`] free before, the sizes cannot tell and only the call's own
/// answer can.
pub fn defrag_evident(before: &MemberStatus, after: &MemberStatus) -> bool {
    let free = |s: &MemberStatus| (s.db_size - s.db_size_in_use).max(0);
    free(before) >= MIN_EVIDENT_FREE_BYTES && free(after) * 2 <= free(before)
}

/// Whether the thresholds say defragment, and why in words (for the result's `reason`).
pub fn needs_defrag(policy: &DefragPolicy, status: &MemberStatus) -> (bool, String) {
    let percent = fragmented_percent(status);
    let size_ok = status.db_size >= policy.min_defrag_bytes;
    let fragmentation_ok = percent >= policy.max_fragmented_percent;
    let facts =
        format!("db {} bytes ({} in use), {percent:.1}% fragmented", status.db_size, status.db_size_in_use);
    // Under a NOSPACE alarm the cluster refuses writes, and without writes bbolt never commits
    // the pages a compaction freed, so `dbSizeInUse` stays stale: the fragmentation figure
    // cannot be trusted. Nor can the size minimum hold it back: a cluster with a small quota
    // fills under it, and an alarmed cluster stays read-only until a defrag frees the space and
    // the alarm is disarmed; that is what maintenance is for.
    if status.errors.iter().any(|e| is_nospace_alarm(e)) {
        return (true, format!("{facts}: a NOSPACE alarm is raised, whatever the thresholds"));
    }
    let reason = match (size_ok, fragmentation_ok) {
        (true, true) => format!(
            "{facts}: at least {} bytes and {}%",
            policy.min_defrag_bytes, policy.max_fragmented_percent
        ),
        (false, _) => format!("{facts}: under the {} bytes minimum", policy.min_defrag_bytes),
        (true, false) => {
            format!("{facts}: under the {}% fragmentation threshold", policy.max_fragmented_percent)
        }
    };
    (size_ok && fragmentation_ok, reason)
}

/// What the run does with one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberAction {
    /// Defragment it (a follower, or a leader with no voting follower to hand over to, or a
    /// leader the policy keeps in place).
    Defrag,
    /// It is the leader: move leadership to a caught-up follower first, then defragment it.
    MoveLeaderThenDefrag,
    /// It is the leader: in place or leadership moved first, decided at its turn from the
    /// followers' measured defrags (policy `Auto`).
    LeaderDecidedAtTurn,
    /// Leave it alone.
    Skip,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMember {
    pub id: u64,
    pub name: String,
    pub was_leader: bool,
    pub db_size: i64,
    pub db_size_in_use: i64,
    pub action: MemberAction,
    pub reason: String,
}

impl PlannedMember {
    pub fn id_hex(&self) -> String {
        format!("{:x}", self.id)
    }

    pub fn will_defrag(&self) -> bool {
        self.action != MemberAction::Skip
    }
}

/// Every member, in processing order: the members to defragment (followers, then the leader),
/// then those left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefragPlan {
    pub leader: u64,
    pub raft_term: u64,
    pub members: Vec<PlannedMember>,
}

impl DefragPlan {
    pub fn is_empty(&self) -> bool {
        !self.members.iter().any(PlannedMember::will_defrag)
    }
}

/// Why the run must not touch the cluster at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("member {name} ({id}) is not healthy: {why}; defragmenting now could cost the quorum")]
    Unhealthy { name: String, id: String, why: String },
    #[error(
        "the members disagree on the leader or see none (leaders seen: {seen}); waiting for a stable leader"
    )]
    NoStableLeader { seen: String },
    #[error(
        "the cluster has {voting} voting member(s); defragmenting would block it \
         (at least {MIN_VOTING_MEMBERS} needed, or --allow-single-member)"
    )]
    TooFewVotingMembers { voting: usize },
    #[error("the member list is empty")]
    NoMembers,
}

/// Checks what must hold before anything is touched, at the start and before every member:
/// every member healthy, one leader everybody agrees on, enough voting members.
pub fn check_preconditions(members: &[MemberObservation], options: &PlanOptions) -> Result<u64, Refusal> {
    if members.is_empty() {
        return Err(Refusal::NoMembers);
    }
    for member in members {
        if let Some(why) = member.unhealthy_because() {
            return Err(Refusal::Unhealthy { name: member.name.clone(), id: member.id_hex(), why });
        }
    }
    let leader = agreed_leader(members)?;
    let voting = members.iter().filter(|m| !m.is_learner).count();
    if voting < MIN_VOTING_MEMBERS && !options.allow_single_member {
        return Err(Refusal::TooFewVotingMembers { voting });
    }
    Ok(leader)
}

fn agreed_leader(members: &[MemberObservation]) -> Result<u64, Refusal> {
    let mut seen: Vec<u64> =
        members.iter().filter_map(|m| m.status.as_ref().ok().map(|s| s.leader)).collect();
    seen.sort_unstable();
    seen.dedup();
    match seen.as_slice() {
        [leader] if members.iter().any(|m| m.id == *leader && !m.is_learner) => Ok(*leader),
        _ => Err(Refusal::NoStableLeader {
            seen: seen.iter().map(|l| format!("{l:x}")).collect::<Vec<_>>().join(","),
        }),
    }
}

/// The plan for the observed members, or why nothing may be done.
pub fn plan_defrag(
    policy: &DefragPolicy,
    options: &PlanOptions,
    members: &[MemberObservation],
) -> Result<DefragPlan, Refusal> {
    let leader = check_preconditions(members, options)?;
    let has_voting_follower = members.iter().any(|m| m.id != leader && !m.is_learner);
    let mut planned: Vec<PlannedMember> =
        members.iter().map(|m| plan_member(policy, options, m, leader, has_voting_follower)).collect();
    // Followers (by name, for a predictable order), then the leader, then the skipped members.
    planned.sort_by_key(|p| (!p.will_defrag(), p.will_defrag() && p.was_leader, p.name.clone(), p.id));
    let raft_term =
        members.iter().filter_map(|m| m.status.as_ref().ok().map(|s| s.raft_term)).max().unwrap_or(0);
    Ok(DefragPlan { leader, raft_term, members: planned })
}

fn plan_member(
    policy: &DefragPolicy,
    options: &PlanOptions,
    member: &MemberObservation,
    leader: u64,
    has_voting_follower: bool,
) -> PlannedMember {
    let status = member.status.clone().unwrap_or_default(); // healthy: checked before
    let was_leader = member.id == leader;
    let (wanted, mut reason) = needs_defrag(policy, &status);
    // An empty version is not known yet (a status written before versions were read): no claim
    // either way. A version reported but unreadable counts as affected (`defrag_risk`).
    let risk = (!status.version.is_empty()).then(|| defrag_risk(&status.version)).flatten();
    let refused = risk.is_some() && options.refuse_affected_versions;
    let action = if member.is_learner || !wanted || refused {
        MemberAction::Skip
    } else if was_leader && has_voting_follower {
        match options.leader_turn {
            LeaderTurnPolicy::Auto => MemberAction::LeaderDecidedAtTurn,
            LeaderTurnPolicy::Always => MemberAction::MoveLeaderThenDefrag,
            LeaderTurnPolicy::Never => MemberAction::Defrag,
        }
    } else {
        MemberAction::Defrag
    };
    if let Some(risk) = risk.filter(|_| wanted && !member.is_learner) {
        reason = if refused {
            format!("{reason}; {risk}: refused by the cluster's policy (upgrade, then it is defragmented)")
        } else {
            format!(
                "{reason}; {risk}: defragmented only when caught up with the leader right before its turn"
            )
        };
    }
    let reason = if member.is_learner { format!("learner: never defragmented ({reason})") } else { reason };
    PlannedMember {
        id: member.id,
        name: member.name.clone(),
        was_leader,
        db_size: status.db_size,
        db_size_in_use: status.db_size_in_use,
        action,
        reason,
    }
}

/// The follower leadership should go to: a healthy voting member within `max_apply_lag` of the
/// leader's commit index, the most caught-up first (ties by name). `None` if there is none.
pub fn choose_transfer_target(members: &[MemberObservation], leader: u64, max_apply_lag: u64) -> Option<u64> {
    let leader_index =
        members.iter().find(|m| m.id == leader).and_then(|m| m.status.as_ref().ok()).map(|s| s.raft_index)?;
    members
        .iter()
        .filter(|m| m.id != leader && !m.is_learner && m.unhealthy_because().is_none())
        .filter_map(|m| m.status.as_ref().ok().map(|s| (m, s.raft_applied_index)))
        .filter(|(_, applied)| applied.saturating_add(max_apply_lag) >= leader_index)
        .min_by_key(|(m, applied)| (Reverse(*applied), m.name.clone()))
        .map(|(m, _)| m.id)
}

/// What to do for the next member, decided on fresh observations taken just before its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepDecision {
    /// Defragment it now; it is not the leader.
    Defrag,
    /// It leads now: move leadership to `to` first.
    MoveLeaderTo { to: u64 },
    /// It leads and is defragmented in place (the leader's turn said so, or there is no voting
    /// follower to hand over to).
    DefragLeader,
    /// It is more than `max_apply_lag` entries behind the leader: wait for it to catch up (the
    /// runner stops when it does not within a bound). Why, naming it.
    Behind(String),
    /// Stop the run: touch nothing more.
    Stop(String),
}

/// Decides the next member's step. The cluster must still be healthy; leadership may have moved
/// since planning, so who leads is read from the fresh observations, not the plan. `leader_turn`
/// is what the leader's turn decided, used only when `member` leads now.
pub fn decide_step(
    member: u64,
    members: &[MemberObservation],
    options: &PlanOptions,
    leader_turn: TurnChoice,
) -> StepDecision {
    let leader = match check_preconditions(members, options) {
        Ok(leader) => leader,
        Err(refusal) => return StepDecision::Stop(refusal.to_string()),
    };
    if member != leader {
        return match behind_leader(members, member, leader, options.max_apply_lag) {
            Some(why) => StepDecision::Behind(why),
            None => StepDecision::Defrag,
        };
    }
    let has_voting_follower = members.iter().any(|m| m.id != leader && !m.is_learner);
    if leader_turn == TurnChoice::InPlace || !has_voting_follower {
        return StepDecision::DefragLeader;
    }
    match choose_transfer_target(members, leader, options.max_apply_lag) {
        Some(to) => StepDecision::MoveLeaderTo { to },
        None => StepDecision::Stop(format!(
            "no healthy follower within {} raft entries of the leader {leader:x} to take leadership; \
             the leader was not defragmented",
            options.max_apply_lag
        )),
    }
}

/// Why `member` counts as behind the leader, if it does: its applied index is more than
/// `max_apply_lag` entries short of the leader's commit index.
pub fn behind_leader(
    members: &[MemberObservation],
    member: u64,
    leader: u64,
    max_apply_lag: u64,
) -> Option<String> {
    let status_of = |id: u64| members.iter().find(|m| m.id == id).and_then(|m| m.status.as_ref().ok());
    let (Some(mine), Some(leaders)) = (status_of(member), status_of(leader)) else {
        return None; // unhealthy members are refused before this
    };
    let lag = leaders.raft_index.saturating_sub(mine.raft_applied_index);
    (lag > max_apply_lag).then(|| {
        let name = members.iter().find(|m| m.id == member).map_or(String::new(), |m| m.name.clone());
        format!(
            "member {name} ({member:x}) has applied index {}, {lag} entries behind the leader's commit \
             index {} (at most {max_apply_lag} allowed)",
            mine.raft_applied_index, leaders.raft_index
        )
    })
}

/// How long the old or the new leader may look unhealthy while leadership moves before the run
/// stops: long enough for the members to see the new term (they see no leader for an election
/// timeout at most), short enough that a transferee that died is noticed within seconds.
pub const TRANSFER_UNHEALTHY_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What the members show while leadership moves from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferSeen {
    /// Both see `to` as the leader: the old leader may be defragmented.
    Agreed,
    /// Both answer and are healthy, but do not agree yet.
    Waiting,
    /// One of the two does not answer or is not healthy: why, naming it.
    Unhealthy(String),
}

/// Judges one observation taken while leadership moves. Only the two members concerned count:
/// a third may be blocked by its own defrag meanwhile, and the next step's checks cover it.
pub fn transfer_seen(members: &[MemberObservation], from: u64, to: u64) -> TransferSeen {
    let concerned: Vec<&MemberObservation> =
        [to, from].iter().filter_map(|id| members.iter().find(|m| m.id == *id)).collect();
    if concerned.len() == 2 && concerned.iter().all(|m| m.status.as_ref().is_ok_and(|s| s.leader == to)) {
        return TransferSeen::Agreed;
    }
    for id in [to, from] {
        let role = if id == to { "the new leader" } else { "the old leader" };
        match members.iter().find(|m| m.id == id) {
            None => return TransferSeen::Unhealthy(format!("{role} {id:x} is no longer a member")),
            Some(m) => {
                if let Some(why) = m.unhealthy_because() {
                    return TransferSeen::Unhealthy(format!("{role} {} ({}): {why}", m.name, m.id_hex()));
                }
            }
        }
    }
    TransferSeen::Waiting
}

/// Whether `member` has caught up with the leader after its defrag: it is healthy, sees a leader,
/// and has applied the leader's commit index (within `max_apply_lag`).
pub fn caught_up(member: &MemberObservation, leader_raft_index: u64, max_apply_lag: u64) -> bool {
    member.unhealthy_because().is_none()
        && member
            .status
            .as_ref()
            .is_ok_and(|s| s.raft_applied_index.saturating_add(max_apply_lag) >= leader_raft_index)
}

/// Members whose `NOSPACE` alarm may be disarmed: the space is back when the member's db is now
/// under `quota_bytes` (when known), or, with the quota unknown, when it was just defragmented.
pub fn alarms_to_disarm(
    alarmed: &[u64],
    after: &[MemberObservation],
    defragmented: &[u64],
    quota_bytes: Option<i64>,
) -> Vec<u64> {
    alarmed
        .iter()
        .copied()
        .filter(|id| {
            let size =
                after.iter().find(|m| m.id == *id).and_then(|m| m.status.as_ref().ok()).map(|s| s.db_size);
            match (quota_bytes, size) {
                (Some(quota), Some(size)) if quota > 0 => size < quota,
                _ => defragmented.contains(id),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;

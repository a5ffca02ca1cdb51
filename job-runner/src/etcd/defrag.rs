//! `groundskeeper-job defrag`: defragment the members that need it, one at a time, without an
//! election.
//!
//! The decisions are in [`groundskeeper_stores::etcd::plan`]; this module observes, acts, and waits:
//! observe → (compact) → plan → for each member: observe again, re-check, maybe move leadership,
//! defragment, wait until it has caught up → disarm `NOSPACE` alarms.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, GetOptions};
use groundskeeper_protocol::operation::LeaderTurnPolicy;
use groundskeeper_protocol::result::{
    AlarmLeft, DefragReport, LeaderChoice, LeaderTransfer, LeaderTurn, MemberDefrag, MemberDefragState,
    TransferState, mib,
};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

use super::compact::{self, Compacted};
use super::lock::{Acquired, DefragLock};
use crate::run::{self, Failure, RunClock, StopSignal};
use groundskeeper_stores::etcd::connect::{Cluster, Connection, EndpointArgs, answered_as};
use groundskeeper_stores::etcd::leader_turn::{
    self, LeaderTurnDecision, LeaderTurnFacts, MeasuredDefrag, TurnChoice,
};
use groundskeeper_stores::etcd::plan::{
    self, DefragPlan, DefragPolicy, MemberAction, MemberObservation, MemberStatus, PlanOptions,
    PlannedMember, Refusal, StepDecision, TransferSeen,
};
use groundskeeper_stores::etcd::versions;

/// How often the runner looks again while it waits for a member.
/// Waits between polls start short, since most waits (a leader change, a member catching up)
/// end within milliseconds, and back off to this so a long wait does not load the cluster.
const MAX_POLL_INTERVAL: Duration = Duration::from_millis(100);
const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(5);
/// Defragment calls per member when calls are cut and the member shows no defrag.
const DEFRAG_ATTEMPTS: u32 = 3;
/// How long a linearizable read through the next member may take before the run stops: a
/// healthy member answers in milliseconds, one cut off from the leader never does.
const LINEARIZABLE_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// One Defragment call running as its own task, so the runner can stop waiting on it without
/// cancelling it. Dropped, it is aborted: by then the member's defrag is known to be over (or the
/// run has given up on it, and etcd finishes a defrag it started either way).
struct DefragCall {
    task: Option<tokio::task::JoinHandle<Result<(), etcd_client::Error>>>,
    cut: bool,
}

/// How a call ended.
enum CallEnd {
    /// The member answered: defragmented.
    Done,
    /// A deadline on the way cut the call: whether the member ran it is unknown.
    Cut,
    Failed(String),
}

/// What polling the member found.
enum DefragSeen {
    Done,
    /// The member serves reads, the call was cut, and the sizes show no defrag.
    NotEvident,
}

impl DefragCall {
    fn start(mut client: etcd_client::Client) -> Self {
        let task = tokio::spawn(async move { client.defragment().await.map(|_| ()) });
        Self { task: Some(task), cut: false }
    }

    /// Waits for the call's end (cancel-safe: the task goes on when this future is dropped).
    async fn answer(&mut self) -> CallEnd {
        let Some(task) = self.task.as_mut() else {
            return CallEnd::Cut;
        };
        let joined = task.await;
        self.task = None;
        self.end_of(joined)
    }

    /// The call's end, if it has ended since the last look.
    fn poll_end(&mut self) -> Option<CallEnd> {
        let task = self.task.take_if(|task| task.is_finished())?;
        let joined = futures::FutureExt::now_or_never(task).expect("a finished task is ready");
        Some(self.end_of(joined))
    }

    fn was_cut(&self) -> bool {
        self.cut
    }

    fn end_of(&mut self, joined: Result<Result<(), etcd_client::Error>, tokio::task::JoinError>) -> CallEnd {
        match joined {
            Ok(Ok(())) => CallEnd::Done,
            Ok(Err(err)) if is_timeout(&err) => {
                self.cut = true;
                CallEnd::Cut
            }
            Ok(Err(err)) => CallEnd::Failed(err.to_string()),
            Err(join) => CallEnd::Failed(format!("the call's task ended: {join}")),
        }
    }
}

impl Drop for DefragCall {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Sleeps between polls: 5 ms, doubling up to [`MAX_POLL_INTERVAL`].
struct PollDelay(Duration);

impl PollDelay {
    fn new() -> Self {
        Self(FIRST_POLL_INTERVAL)
    }

    async fn sleep(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(MAX_POLL_INTERVAL);
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct DefragArgs {
    #[command(flatten)]
    pub connection: EndpointArgs,
    /// Defragment a member only when its db is at least this large (bytes).
    #[arg(long, default_value_t = plan::DEFAULT_MIN_DEFRAG_BYTES)]
    pub min_defrag_bytes: i64,
    /// ... and only when at least this share of its db (percent) is free pages.
    #[arg(long, default_value_t = plan::DEFAULT_MAX_FRAGMENTED_PERCENT)]
    pub max_fragmented_percent: f64,
    /// Compact to current − N first (the thresholds are judged after the compaction).
    #[arg(long)]
    pub compact_retain_revisions: Option<i64>,
    /// That compaction never goes past this revision (the newest one backed up): a target
    /// beyond it is held back to it.
    #[arg(long, requires = "compact_retain_revisions")]
    pub compact_not_past: Option<i64>,
    /// Whether leadership moves before the leader's defrag: `auto` (in place when its defrag,
    /// predicted from this run's followers, takes at most --leader-in-place-budget-seconds; else
    /// moved first), `always` or `never`.
    #[arg(long, default_value = "auto", value_parser = parse_leader_turn)]
    pub leader_turn: LeaderTurnPolicy,
    /// The same as `--leader-turn never`.
    #[arg(long, conflicts_with = "leader_turn")]
    pub no_move_leader: bool,
    /// `--leader-turn auto`: the longest predicted leader defrag done in place [default: 5].
    #[arg(long, value_name = "SECONDS")]
    pub leader_in_place_budget_seconds: Option<u64>,
    /// Skip members on an etcd version whose defrag can corrupt data when it overlaps a snapshot
    /// apply (before 3.5.23, 3.6.0–3.6.4), instead of defragmenting them once caught up.
    #[arg(long)]
    pub refuse_affected_versions: bool,
    /// The members' storage quota (bytes, their `--quota-backend-bytes`): a NOSPACE alarm is
    /// disarmed once a member's db is under it. etcd 3.6.6 and later report their own.
    #[arg(long, value_name = "BYTES")]
    pub quota_backend_bytes: Option<i64>,
    /// Accept clusters with fewer than 3 voting members (a defrag then blocks the cluster).
    #[arg(long)]
    pub allow_single_member: bool,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The end of the maintenance window (RFC 3339, e.g. `2026-11-25T05:00:00Z`): no member is
    /// started whose expected defrag would end after it; it is left for the next window.
    #[arg(long, value_name = "TIME")]
    pub not_after: Option<String>,
    /// When that window opened (RFC 3339): a member expected to take longer than the whole window
    /// may still start as the first member of the run.
    #[arg(long, value_name = "TIME", requires = "not_after")]
    pub window_opened: Option<String>,
    /// A member's expected defrag rate, `NAME=BYTES_PER_SECOND` (repeatable; from its earlier
    /// defrags; at least 1). Members not named: 50 MiB/s.
    #[arg(long = "expected-rate", value_name = "NAME=BYTES_PER_SECOND")]
    pub expected_rates: Vec<String>,
    /// How long one Defragment call may take before the runner stops waiting on the call and
    /// polls the member instead (the defrag goes on server-side either way).
    #[arg(long, default_value_t = 60_000)]
    pub defrag_call_timeout_ms: u64,
    /// How long a member more than 100 raft entries behind the leader may take to catch up before
    /// its turn; then the run stops, naming it.
    #[arg(long, default_value_t = 30)]
    pub catch_up_timeout_seconds: u64,
    /// How long to wait for one member to finish and catch up, or for a leadership transfer.
    #[arg(long, default_value_t = 600)]
    pub member_timeout_seconds: u64,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds: after SIGTERM, a defrag in flight is waited for
    /// until a few seconds before it ends, then the result is written.
    #[arg(long, default_value_t = exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

/// Everything a defrag run needs, checked.
#[derive(Debug, Clone)]
pub struct DefragOptions {
    pub connection: Connection,
    pub policy: DefragPolicy,
    pub plan: PlanOptions,
    pub compact_retain_revisions: Option<i64>,
    /// `--compact-not-past`.
    pub compact_not_past: Option<i64>,
    pub dry_run: bool,
    /// `--not-after` and `--expected-rate`: the window members must fit in.
    pub window: Option<WindowEnd>,
    pub defrag_call_timeout: Duration,
    pub member_timeout: Duration,
    pub catch_up_timeout: Duration,
    pub grace_period: Duration,
    /// `--quota-backend-bytes`.
    pub quota_backend_bytes: Option<i64>,
}

impl DefragArgs {
    pub fn options(&self) -> Result<DefragOptions, Failure> {
        if self.min_defrag_bytes < 0 {
            return Err(Failure::bad_input(format!(
                "--min-defrag-bytes {}: must be 0 or more",
                self.min_defrag_bytes
            )));
        }
        if !(0.0..=100.0).contains(&self.max_fragmented_percent) {
            return Err(Failure::bad_input(format!(
                "--max-fragmented-percent {}: must be between 0 and 100",
                self.max_fragmented_percent
            )));
        }
        if let Some(quota) = self.quota_backend_bytes.filter(|q| *q <= 0) {
            return Err(Failure::bad_input(format!("--quota-backend-bytes {quota}: must be more than 0")));
        }
        let budget = match self.leader_in_place_budget_seconds {
            None => leader_turn::DEFAULT_IN_PLACE_BUDGET,
            Some(seconds) => {
                run::check_wait("--leader-in-place-budget-seconds", Duration::from_secs(seconds))?
            }
        };
        if let Some(n) = self.compact_retain_revisions.filter(|n| *n < 0) {
            return Err(Failure::bad_input(format!("--compact-retain-revisions {n}: must be 0 or more")));
        }
        Ok(DefragOptions {
            connection: self.connection.connection()?,
            policy: DefragPolicy {
                min_defrag_bytes: self.min_defrag_bytes,
                max_fragmented_percent: self.max_fragmented_percent,
            },
            plan: PlanOptions {
                leader_turn: self.leader_turn_policy(),
                in_place_budget: budget,
                allow_single_member: self.allow_single_member,
                max_apply_lag: plan::DEFAULT_MAX_APPLY_LAG,
                refuse_affected_versions: self.refuse_affected_versions,
            },
            compact_retain_revisions: self.compact_retain_revisions,
            compact_not_past: self.compact_not_past,
            dry_run: self.dry_run,
            window: window_of(self)?,
            defrag_call_timeout: run::check_wait(
                "--defrag-call-timeout-ms",
                Duration::from_millis(self.defrag_call_timeout_ms),
            )?,
            member_timeout: run::check_wait(
                "--member-timeout-seconds",
                Duration::from_secs(self.member_timeout_seconds),
            )?,
            catch_up_timeout: run::check_wait(
                "--catch-up-timeout-seconds",
                Duration::from_secs(self.catch_up_timeout_seconds),
            )?,
            quota_backend_bytes: self.quota_backend_bytes,
            grace_period: run::check_wait(
                "--grace-period-seconds",
                Duration::from_secs(self.grace_period_seconds),
            )?,
        })
    }
}

impl DefragArgs {
    /// `--leader-turn`, with `--no-move-leader` read as `never`.
    pub fn leader_turn_policy(&self) -> LeaderTurnPolicy {
        if self.no_move_leader { LeaderTurnPolicy::Never } else { self.leader_turn }
    }
}

fn parse_leader_turn(text: &str) -> Result<LeaderTurnPolicy, String> {
    LeaderTurnPolicy::parse(text).ok_or_else(|| format!("{text:?}: give auto, always or never"))
}

/// The end of the maintenance window and each member's expected rate.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowEnd {
    pub not_after: jiff::Timestamp,
    pub opened: Option<jiff::Timestamp>,
    pub rates: std::collections::BTreeMap<String, f64>,
}

impl WindowEnd {
    /// Why `member` may not start now, if it may not (`first`: no member was defragmented yet in
    /// this run).
    fn defers(&self, member: &PlannedMember, db_size: i64, first: bool) -> Option<String> {
        let rate = self.rates.get(&member.name).copied().unwrap_or(plan::DEFAULT_DEFRAG_BYTES_PER_SECOND);
        plan::defer_past_window(db_size, rate, jiff::Timestamp::now(), self.not_after, self.opened, first)
    }
}

/// `--not-after` and `--expected-rate` checked; bad input names the flag.
fn window_of(args: &DefragArgs) -> Result<Option<WindowEnd>, Failure> {
    let Some(text) = &args.not_after else {
        if !args.expected_rates.is_empty() {
            return Err(Failure::bad_input("--expected-rate is for --not-after: give both or neither"));
        }
        return Ok(None);
    };
    let not_after = text.parse::<jiff::Timestamp>().map_err(|e| {
        Failure::bad_input(format!("--not-after {text:?}: not a time like 2026-11-25T05:00:00Z ({e})"))
    })?;
    let opened = match &args.window_opened {
        Some(text) => Some(text.parse::<jiff::Timestamp>().map_err(|e| {
            Failure::bad_input(format!(
                "--window-opened {text:?}: not a time like 2026-11-25T01:00:00Z ({e})"
            ))
        })?),
        None => None,
    };
    if let Some(opened) = opened.filter(|opened| *opened >= not_after) {
        return Err(Failure::bad_input(format!(
            "--window-opened {opened} is not before --not-after {not_after}: the window would close \
             before it opened; give the time the window opened and the time it ends"
        )));
    }
    let mut rates = std::collections::BTreeMap::new();
    for entry in &args.expected_rates {
        let parsed = entry
            .rsplit_once('=')
            .and_then(|(member, rate)| Some((member, rate.parse::<f64>().ok()?)))
            .filter(|(member, rate)| !member.is_empty() && rate.is_finite() && *rate >= 1.0);
        let Some((member, rate)) = parsed else {
            return Err(Failure::bad_input(format!(
                "--expected-rate {entry:?}: give NAME=BYTES_PER_SECOND, e.g. etcd-0=52428800"
            )));
        };
        if rates.insert(member.to_owned(), rate).is_some() {
            return Err(Failure::bad_input(format!(
                "--expected-rate names member {member:?} twice: give one rate per member"
            )));
        }
    }
    Ok(Some(WindowEnd { not_after, opened, rates }))
}

/// What the run is doing, for a person watching (logs, the local demo, tests that interfere).
#[derive(Debug)]
pub enum Progress<'a> {
    Compacted {
        revision: i64,
        already: bool,
    },
    Planned(&'a DefragPlan),
    /// The leader's turn was decided: in place or leadership moved first, and why.
    LeaderTurnDecided(&'a LeaderTurn),
    /// etcd answered the transfer: leadership moved (the members may not all follow yet).
    LeaderMoved {
        from: &'a str,
        to: &'a str,
    },
    MemberStarted(&'a PlannedMember),
    /// The member was defragmented and has caught up; the next one has not started.
    MemberDone(&'a MemberDefrag),
}

/// Runs the maintenance. `on_progress` sees every step as it happens.
pub async fn run_defrag(options: &DefragOptions, on_progress: &mut dyn FnMut(Progress<'_>)) -> JobResult {
    run_defrag_until(options, &StopSignal::never(), on_progress).await
}

/// Runs the maintenance until it is done or `stop` says to stop. After a stop no member is
/// started and no leadership moves; a defrag call already sent is waited for until the stop's
/// deadline, then reported `unknown`. The result says what happened to every member either way.
pub async fn run_defrag_until(
    options: &DefragOptions,
    stop: &StopSignal,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> JobResult {
    let clock = RunClock::start();
    let mut report = DefragReport { dry_run: options.dry_run, ..DefragReport::default() };
    let result = {
        let run = Run {
            options,
            report: RefCell::new(&mut report),
            on_progress: RefCell::new(on_progress),
            stop,
            lock: RefCell::new(None),
            measured: RefCell::new(Vec::new()),
        };
        let result = tokio::select! {
            result = run.go() => result,
            // What is in flight is given up on here, so the result is written before SIGKILL;
            // the report already says what is known of every member.
            given_up = stop.deadline_passed() => Err(given_up.failure(
                "the grace period was ending with remote work in flight; what was in flight is reported unknown",
            )),
        };
        // A run given up on still holds the lock: give it back, so the retry need not wait for
        // the lease to end (a release takes one answering member, bounded).
        let held = run.lock.borrow_mut().take();
        if let Some(lock) = held {
            lock.release().await;
        }
        result
    };
    let (outcome, failure, message) = match result {
        Ok((outcome, message)) => (outcome, None, Some(message)),
        Err(failure) => (Outcome::Failed, Some(failure), None),
    };
    let noticed = noticed(&report);
    let mut result = clock.finish(Report::Defrag(report), outcome, failure);
    if message.is_some() {
        result.message = message;
    }
    if let Some(message) = &mut result.message {
        message.push_str(&noticed);
    }
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    result
}

/// What the result's message adds after the summary: alarms left raised and warnings.
fn noticed(report: &DefragReport) -> String {
    let mut text = String::new();
    for alarm in &report.alarms_left {
        text.push_str(&format!(
            "; the NOSPACE alarm of member {} is still raised: {}",
            alarm.member, alarm.reason
        ));
    }
    for warning in &report.warnings {
        text.push_str(&format!("; {warning}"));
    }
    text
}

struct Run<'a> {
    options: &'a DefragOptions,
    /// Kept up to date step by step, so that a run given up on at its stop deadline still
    /// reports what it did. Cells: a follower's defrag and a leadership transfer run side by side.
    report: RefCell<&'a mut DefragReport>,
    on_progress: RefCell<&'a mut dyn FnMut(Progress<'_>)>,
    stop: &'a StopSignal,
    /// The cluster's defrag lock while the run holds it, here rather than in `go`'s future so
    /// that a run given up on at its stop deadline still releases it.
    lock: RefCell<Option<DefragLock>>,
    /// This run's follower defrags, size and time: what the leader's turn is predicted from.
    measured: RefCell<Vec<MeasuredDefrag>>,
}

/// A member's defrag ended without being known done: what is known, and why.
struct DefragFailure {
    state: MemberDefragState,
    failure: Failure,
}

impl DefragFailure {
    fn new(state: MemberDefragState, failure: Failure) -> Self {
        Self { state, failure }
    }
}

impl Run<'_> {
    fn progress(&self, progress: Progress<'_>) {
        (self.on_progress.borrow_mut())(progress)
    }

    fn update_member(&self, index: usize, change: impl FnOnce(&mut MemberDefrag)) {
        change(&mut self.report.borrow_mut().members[index]);
    }

    fn record_transfer(&self, transfer: LeaderTransfer) {
        let mut report = self.report.borrow_mut();
        if transfer.state == TransferState::Moved {
            report.leader_moved_to = Some(transfer.to.clone());
        }
        report.leader_transfer = Some(transfer);
    }

    /// Err when a stop was asked for: nothing more may start.
    fn check_stop(&self, what_not_done: impl FnOnce() -> String) -> Result<(), Failure> {
        match self.stop.get() {
            Some(stop) => Err(stop.failure(&what_not_done())),
            None => Ok(()),
        }
    }

    async fn go(&self) -> Result<(Outcome, String), Failure> {
        let cluster = Cluster::discover(self.options.connection.clone()).await?;
        self.note_rates_of_unknown_members(&cluster);
        // Nothing is touched, not even compacted, unless the cluster is fit for it.
        let leader = plan::check_preconditions(&cluster.observe().await, &self.options.plan)
            .map_err(refusal_failure)?;
        if self.options.dry_run {
            return self.maintain(&cluster).await;
        }
        // Through the leader first: a follower that lags or is cut off would time the grant out.
        let mut clients: Vec<_> = cluster.client_of(leader).into_iter().collect();
        clients.extend(
            cluster.members.iter().filter(|m| m.id != leader).filter_map(|m| cluster.client_of(m.id).ok()),
        );
        match DefragLock::acquire(clients).await? {
            Acquired::Held(lock) => {
                *self.lock.borrow_mut() = Some(*lock);
                let result = self.maintain(&cluster).await;
                let held = self.lock.borrow_mut().take();
                if let Some(lock) = held {
                    lock.release().await;
                }
                result
            }
            Acquired::NoSpace(why) => {
                tracing::warn!(%why, "the cluster takes no write: defragmenting without the lock");
                self.maintain(&cluster).await
            }
        }
    }

    /// An `--expected-rate` for a member the cluster does not have is not used: said in the
    /// report (with the member it probably meant), not silently dropped.
    fn note_rates_of_unknown_members(&self, cluster: &Cluster) {
        let Some(window) = &self.options.window else { return };
        let names: Vec<&str> = cluster.members.iter().map(|m| m.name.as_str()).collect();
        for member in window.rates.keys().filter(|m| !names.contains(&m.as_str())) {
            let meant = names.iter().find(|n| n.eq_ignore_ascii_case(member));
            let hint = meant.map(|n| format!(" (member names are case-sensitive: {n}?)")).unwrap_or_default();
            let warning = format!(
                "--expected-rate names {member:?}, which is not a member of the cluster{hint}; members: {}; \
                 its rate was not used",
                names.join(", ")
            );
            tracing::warn!("{warning}");
            self.report.borrow_mut().warnings.push(warning);
        }
    }

    /// Compaction first when asked for, then each member's defrag in the planned order.
    async fn maintain(&self, cluster: &Cluster) -> Result<(Outcome, String), Failure> {
        if let Some(retain) = self.options.compact_retain_revisions {
            self.check_stop(|| "nothing was compacted or defragmented".to_owned())?;
            self.compact(cluster, retain).await?;
        }
        let plan = plan::plan_defrag(&self.options.policy, &self.options.plan, &cluster.observe().await)
            .map_err(refusal_failure)?;
        self.progress(Progress::Planned(&plan));
        if self.options.dry_run || plan.is_empty() {
            self.report.borrow_mut().members = plan.members.iter().map(|m| not_done(m, &m.reason)).collect();
            let summary = if self.options.dry_run { "dry run: " } else { "" };
            let outcome = if plan.is_empty() { Outcome::Skipped } else { Outcome::Succeeded };
            let count = plan.members.iter().filter(|m| m.will_defrag()).count();
            // A compaction asked for with the defrag happened even when no member needs a defrag.
            let compacted = self
                .report
                .borrow()
                .compacted_revision
                .map(|revision| format!("compacted to revision {revision}; "))
                .unwrap_or_default();
            return Ok((
                outcome,
                format!(
                    "{summary}{compacted}{count} of {} member(s) over the thresholds",
                    plan.members.len()
                ),
            ));
        }
        // Every member is in the report from here on, as not reached until its turn.
        self.report.borrow_mut().members = plan
            .members
            .iter()
            .map(|m| match m.action {
                MemberAction::Skip => not_done(m, &m.reason),
                _ => not_reached(m, "the run stopped earlier"),
            })
            .collect();
        let mut defragmented = Vec::new();
        let mut deferred = 0;
        for (i, member) in plan.members.iter().enumerate() {
            if !member.will_defrag() {
                continue;
            }
            if let Some(stop) = self.stop.get() {
                let left = plan.members[i..].iter().filter(|m| m.will_defrag()).count();
                for (j, rest) in plan.members.iter().enumerate().skip(i) {
                    if rest.will_defrag() {
                        self.update_member(j, |m| {
                            *m = not_reached(rest, &format!("stopped by {}", stop.signal))
                        });
                    }
                }
                return Err(stop
                    .failure(&format!("{} member(s) defragmented, {left} not reached", defragmented.len())));
            }
            if let Some(why) = self.deferred(cluster, member, defragmented.is_empty()).await {
                tracing::info!(member = %member.name, "{why}");
                self.update_member(i, |m| {
                    *m = not_done(member, &why);
                    m.state = Some(MemberDefragState::Deferred);
                });
                deferred += 1;
                continue;
            }
            // Touch nothing more on failure: the members not reached are listed as such.
            self.process(cluster, i, member).await?;
            defragmented.push(member.id);
        }
        self.disarm_nospace(cluster, &defragmented).await;
        let mut summary = format!("defragmented {} member(s)", defragmented.len());
        if deferred > 0 {
            summary.push_str(&format!("; {deferred} left for the next maintenance window"));
        }
        Ok((Outcome::Succeeded, summary))
    }

    /// Why `member` is left for the next maintenance window (its expected defrag, at its size
    /// now, would run past the window's end), if it is.
    async fn deferred(&self, cluster: &Cluster, member: &PlannedMember, first: bool) -> Option<String> {
        let window = self.options.window.as_ref()?;
        let size = status_size(&cluster.observe().await, member.id).unwrap_or(member.db_size);
        window.defers(member, size, first)
    }

    async fn compact(&self, cluster: &Cluster, retain: i64) -> Result<(), Failure> {
        let leader = cluster.observe().await.iter().find_map(|m| m.status.as_ref().ok().map(|s| s.leader));
        let mut client = cluster
            .client_of(leader.unwrap_or_default())
            .map_err(|e| Failure::retryable(format!("cannot reach the leader to compact: {e}")))?;
        let current = compact::current_revision(&mut client).await?;
        let wanted = compact::target_revision(compact::CompactTarget::RetainRevisions(retain), current)?;
        let (target, held_back_from) = compact::held_at(wanted, self.options.compact_not_past);
        self.report.borrow_mut().compaction_held_back_from = held_back_from;
        if let Some(from) = held_back_from {
            tracing::info!(from, not_past = ?self.options.compact_not_past, "compaction held back at the newest revision backed up");
        }
        let Some(revision) = target else {
            return Ok(()); // history shorter than what is kept, or nothing backed up yet
        };
        if self.options.dry_run {
            // The plan below is judged on the sizes before this compaction.
            tracing::info!(revision, "dry run: would compact to this revision first");
            return Ok(());
        }
        let finished_before = self.compactions_finished(cluster).await;
        // Physical: the pages it frees must be free before the thresholds are judged.
        let already = compact::compact_to(&mut client, revision, true).await? == Compacted::AlreadyCompacted;
        self.report.borrow_mut().compacted_revision = Some(revision);
        // Every member applies the compaction on its own backend: wait until they all did.
        for id in cluster.members.iter().map(|m| m.id) {
            self.wait_caught_up(cluster, id).await?;
        }
        if !already {
            self.wait_compactions_finished(cluster, &finished_before).await?;
        }
        self.progress(Progress::Compacted { revision, already });
        Ok(())
    }

    /// Each member's count of finished compactions, where its metrics say.
    async fn compactions_finished(&self, cluster: &Cluster) -> Vec<(u64, u64)> {
        let mut counts = Vec::new();
        for member in &cluster.members {
            let Some(url) = &member.url else { continue };
            let metrics = cluster.connection.metrics(url, LINEARIZABLE_READ_TIMEOUT).await;
            if let Some(count) = metrics.ok().as_deref().and_then(versions::compactions_finished) {
                counts.push((member.id, count));
            }
        }
        counts
    }

    /// Waits until every member counted before has finished one more compaction: a member
    /// applies a compaction in the background after it applied its raft entry, and its defrag
    /// must not overlap it (etcd 3.8 refuses that; earlier versions let the two contend for the
    /// backend). A member whose metrics cannot be read is not waited for (logged).
    async fn wait_compactions_finished(
        &self,
        cluster: &Cluster,
        before: &[(u64, u64)],
    ) -> Result<(), Failure> {
        let deadline = Instant::now() + self.options.member_timeout;
        let mut delay = PollDelay::new();
        let mut waiting: Vec<(u64, u64)> = before.to_vec();
        while !waiting.is_empty() {
            let now = self.compactions_finished(cluster).await;
            waiting.retain(|(id, count)| !now.iter().any(|(seen, c)| seen == id && c > count));
            if waiting.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                let names: Vec<String> = waiting
                    .iter()
                    .map(|(id, _)| cluster.member(*id).map_or(format!("{id:x}"), |m| m.name.clone()))
                    .collect();
                return Err(Failure::retryable(format!(
                    "the compaction did not finish on {} within {:?}; nothing was defragmented",
                    names.join(", "),
                    self.options.member_timeout
                )));
            }
            delay.sleep().await;
        }
        if before.len() < cluster.members.len() {
            tracing::warn!("some members' metrics could not be read: their compaction was not waited for");
        }
        Ok(())
    }

    /// One member (entry `index` of the report): check the cluster and the member, decide the
    /// leader's turn when it leads, maybe move leadership away, defragment, wait until caught
    /// up. The member's entry says what happened, whichever way this ends.
    async fn process(&self, cluster: &Cluster, index: usize, member: &PlannedMember) -> Result<(), Failure> {
        let stopped_here = |failure: Failure| {
            self.update_member(index, |m| {
                *m = not_done(member, &format!("stopped: {}", failure.message));
                m.state = Some(MemberDefragState::Stopped);
            });
            failure
        };
        let (observed, decision, turn) = self.ready_for(cluster, member).await.map_err(stopped_here)?;
        let was_leader = match decision {
            StepDecision::MoveLeaderTo { to } => {
                self.record_turn(member, turn.as_ref());
                self.transfer_leadership(cluster, member, to).await.map_err(stopped_here)?;
                true
            }
            StepDecision::DefragLeader => {
                self.record_turn(member, turn.as_ref());
                true
            }
            StepDecision::Defrag => false,
            StepDecision::Stop(_) | StepDecision::Behind(_) => {
                unreachable!("ready_for returns those as errors")
            }
        };
        self.progress(Progress::MemberStarted(member));
        let before_status = observed.iter().find(|m| m.id == member.id).and_then(|m| m.status.as_ref().ok());
        let before = before_status.map_or(member.db_size, |s| s.db_size);
        self.update_member(index, |m| {
            m.db_size_before = before;
            m.db_size_after = before;
            m.was_leader = was_leader || member.was_leader;
        });
        let started = Instant::now();
        let defragged = self.defragment(cluster, index, member, before_status).await;
        let duration = started.elapsed();
        let duration_ms = duration.as_millis() as u64;
        if let Err(DefragFailure { state, failure }) = defragged {
            self.update_member(index, |m| {
                m.state = Some(state);
                m.duration_ms = duration_ms;
                m.reason = match state {
                    MemberDefragState::Stopped => format!("stopped: {}", failure.message),
                    MemberDefragState::Unknown => format!("unknown: {}", failure.message),
                    _ => format!("failed: {}", failure.message),
                };
            });
            return Err(failure);
        }
        self.update_member(index, |m| {
            m.state = Some(MemberDefragState::Defragmented);
            m.defragmented = true;
            m.duration_ms = duration_ms;
            m.reason = member.reason.clone();
        });
        if was_leader {
            if let Some(turn) = self.report.borrow_mut().leader_turn.as_mut() {
                turn.actual_ms = Some(duration_ms);
            }
        } else {
            self.measured.borrow_mut().push(MeasuredDefrag { bytes: before, duration });
        }
        if let Err(failure) = self.wait_caught_up(cluster, member.id).await {
            self.update_member(index, |m| {
                m.reason = format!(
                    "{}; defragmented, then the run stopped before its size after was read: {}",
                    member.reason, failure.message
                );
            });
            return Err(failure);
        }
        let after = status_size(&cluster.observe().await, member.id);
        self.update_member(index, |m| match after {
            Some(after) => m.db_size_after = after,
            None => m.reason = format!("{}; its size after could not be read", member.reason),
        });
        let done = self.report.borrow().members[index].clone();
        self.progress(Progress::MemberDone(&done));
        Ok(())
    }

    /// Observes until `member` may go: every member healthy and agreeing on one leader, and the
    /// member within `max_apply_lag` entries of the leader (a member behind is waited for up to
    /// `--catch-up-timeout-seconds`), then a linearizable read through it answers. Returns the
    /// observation, the step, and the leader's turn when the member leads now.
    async fn ready_for(
        &self,
        cluster: &Cluster,
        member: &PlannedMember,
    ) -> Result<(Vec<MemberObservation>, StepDecision, Option<LeaderTurnDecision>), Failure> {
        let deadline = Instant::now() + self.options.catch_up_timeout;
        let mut delay = PollDelay::new();
        let mut non_blocking = None;
        loop {
            let observed = cluster.observe().await;
            // Its metrics are read once, and only when it leads now under `Auto`.
            let leads =
                plan::check_preconditions(&observed, &self.options.plan).is_ok_and(|l| l == member.id);
            if leads && non_blocking.is_none() && self.options.plan.leader_turn == LeaderTurnPolicy::Auto {
                non_blocking = Some(self.reports_non_blocking_defrag(cluster, member).await);
            }
            let turn = self.leader_turn_for(&observed, member, non_blocking.unwrap_or(false));
            let choice = turn.as_ref().map_or(TurnChoice::InPlace, |t| t.choice);
            match plan::decide_step(member.id, &observed, &self.options.plan, choice) {
                StepDecision::Stop(why) => {
                    return Err(Failure::retryable(format!("stopped before member {}: {why}", member.name)));
                }
                StepDecision::Behind(why) if Instant::now() >= deadline => {
                    return Err(Failure::retryable(format!(
                        "stopped before member {}: {why}, still after {:?}; a member this far behind may \
                         be catching up from a snapshot, which a defrag must not overlap (check its disk \
                         and network, then retry)",
                        member.name, self.options.catch_up_timeout
                    )));
                }
                StepDecision::Behind(_) => delay.sleep().await,
                decision => {
                    self.read_through(cluster, member).await?;
                    return Ok((observed, decision, turn));
                }
            }
        }
    }

    /// A linearizable read through `member`: it needs the leader's confirmation, so a member cut
    /// off from the leader (its peer traffic lost) fails it even while its own `Status` answers.
    async fn read_through(&self, cluster: &Cluster, member: &PlannedMember) -> Result<(), Failure> {
        let failed = |why: String| {
            Failure::retryable(format!(
                "stopped before member {} ({}): a linearizable read through it {why}; it may be cut \
                 off from the leader, and the run touches nothing more (check its peer network, then \
                 retry)",
                member.name,
                member.id_hex()
            ))
        };
        let mut client =
            cluster.client_of(member.id).map_err(|e| failed(format!("could not be made: {e}")))?;
        match tokio::time::timeout(LINEARIZABLE_READ_TIMEOUT, client.get("groundskeeper/health-probe", None))
            .await
        {
            Ok(Ok(answer)) => match answer.header().map(|h| h.member_id()) {
                Some(id) if id == member.id => Ok(()),
                other => {
                    Err(failed(format!("was answered by member {:x} instead", other.unwrap_or_default())))
                }
            },
            Ok(Err(err)) => Err(failed(format!("failed: {err}"))),
            Err(_) => Err(failed(format!("did not answer within {LINEARIZABLE_READ_TIMEOUT:?}"))),
        }
    }

    /// The leader's turn when `member` leads now and has a voting follower to hand over to.
    fn leader_turn_for(
        &self,
        observed: &[MemberObservation],
        member: &PlannedMember,
        non_blocking: bool,
    ) -> Option<LeaderTurnDecision> {
        let leader = plan::check_preconditions(observed, &self.options.plan).ok()?;
        let has_voting_follower = observed.iter().any(|m| m.id != leader && !m.is_learner);
        if leader != member.id || !has_voting_follower {
            return None;
        }
        let measured = self.measured.borrow();
        let earlier_rate = self.options.window.as_ref().and_then(|w| w.rates.get(&member.name).copied());
        Some(leader_turn::decide_leader_turn(&LeaderTurnFacts {
            policy: self.options.plan.leader_turn,
            budget: self.options.plan.in_place_budget,
            leader_db_size: status_size(observed, member.id).unwrap_or(member.db_size),
            measured: &measured,
            earlier_rate,
            non_blocking,
        }))
    }

    /// Whether the member's metrics report a non-blocking defrag (its `NonBlockingDefrag` gate
    /// on). Metrics that cannot be read count as no: the careful choice.
    async fn reports_non_blocking_defrag(&self, cluster: &Cluster, member: &PlannedMember) -> bool {
        let Some(url) = cluster.member(member.id).and_then(|m| m.url.clone()) else {
            return false;
        };
        match cluster.connection.metrics(&url, LINEARIZABLE_READ_TIMEOUT).await {
            Ok(metrics) => versions::reports_non_blocking_defrag(&metrics),
            Err(why) => {
                tracing::debug!(member = %member.name, %why, "metrics not read: its defrag counts as blocking");
                false
            }
        }
    }

    fn record_turn(&self, member: &PlannedMember, turn: Option<&LeaderTurnDecision>) {
        let Some(turn) = turn else { return };
        let decided = LeaderTurn {
            member: member.name.clone(),
            policy: self.options.plan.leader_turn.as_str().to_owned(),
            choice: match turn.choice {
                TurnChoice::InPlace => LeaderChoice::InPlace,
                TurnChoice::TransferFirst => LeaderChoice::TransferFirst,
            },
            reason: turn.reason.clone(),
            predicted_ms: Some(u64::try_from(turn.predicted.as_millis()).unwrap_or(u64::MAX)),
            budget_ms: self.options.plan.in_place_budget.as_millis() as u64,
            rate_bytes_per_second: Some(turn.rate.round() as u64),
            rate_from: Some(turn.rate_from.describe()),
            actual_ms: None,
        };
        self.progress(Progress::LeaderTurnDecided(&decided));
        self.report.borrow_mut().leader_turn = Some(decided);
    }

    /// Moves leadership from `from` to `to` and waits until both agree; the new leader's name.
    /// The report says what became of the transfer, however this ends. A member among the two
    /// that is unhealthy for [`plan::TRANSFER_UNHEALTHY_LIMIT`] stops the wait: a transferee that
    /// died will never agree.
    async fn transfer_leadership(
        &self,
        cluster: &Cluster,
        from: &PlannedMember,
        to: u64,
    ) -> Result<String, Failure> {
        let to_name = cluster.member(to).map(|m| m.name.clone()).unwrap_or_else(|| format!("{to:x}"));
        self.check_stop(|| format!("leadership was not moved from {} to {to_name}", from.name))?;
        // MoveLeader must be sent to the leader itself.
        let mut client = cluster
            .client_of(from.id)
            .map_err(|e| Failure::retryable(format!("cannot reach the leader {}: {e}", from.name)))?;
        tracing::info!(from = %from.name, to = %to_name, "moving leadership away before the leader's turn");
        let transfer = |state, message: Option<String>| LeaderTransfer {
            from: from.name.clone(),
            to: to_name.clone(),
            state,
            message,
        };
        self.record_transfer(transfer(
            TransferState::Unknown,
            Some("MoveLeader was sent; the run ended before its answer".into()),
        ));
        if let Err(err) = client.move_leader(to).await {
            let message = format!("moving leadership from {} to {to_name} failed: {err}", from.name);
            let state = if is_timeout(&err) { TransferState::Unknown } else { TransferState::Failed };
            self.record_transfer(transfer(state, Some(message.clone())));
            return Err(Failure::retryable(message));
        }
        // etcd answers MoveLeader once the old leader follows the new one: leadership moved.
        self.record_transfer(transfer(TransferState::Moved, None));
        self.progress(Progress::LeaderMoved { from: &from.name, to: &to_name });
        let deadline = Instant::now() + self.options.member_timeout;
        let mut unhealthy_since: Option<Instant> = None;
        let mut delay = PollDelay::new();
        loop {
            let observed = cluster.observe().await;
            match plan::transfer_seen(&observed, from.id, to) {
                TransferSeen::Agreed => return Ok(to_name),
                TransferSeen::Waiting => unhealthy_since = None,
                TransferSeen::Unhealthy(why) => {
                    let since = *unhealthy_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= plan::TRANSFER_UNHEALTHY_LIMIT {
                        let message = format!(
                            "leadership moved from {} to {to_name}, then {why} for {:?}; the run \
                             stopped and touches nothing more (check the member, then retry)",
                            from.name,
                            plan::TRANSFER_UNHEALTHY_LIMIT
                        );
                        self.record_transfer(transfer(TransferState::Moved, Some(message.clone())));
                        return Err(Failure::retryable(message));
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(Failure::retryable(format!(
                    "leadership moved to {to_name}, but {} and {to_name} did not both see it within {:?}",
                    from.name, self.options.member_timeout
                )));
            }
            delay.sleep().await;
        }
    }

    /// Defragments one member and knows it happened: the call's own answer says so, or, when the
    /// call outlives `--defrag-call-timeout-ms` or is cut by a deadline on the way (a proxy's),
    /// the member's sizes do once it serves reads again ([`plan::defrag_evident`]).
    ///
    /// The call runs as a task of its own and is never dropped while it may still be on its way:
    /// a call abandoned in its first milliseconds may never reach the member, which then serves
    /// reads at once, untouched. A call that was cut while the sizes show nothing is made again,
    /// up to [`DEFRAG_ATTEMPTS`] times. No call is made once a stop was asked for; a call already
    /// made is followed to its end (the run gives up on it at the stop's deadline).
    async fn defragment(
        &self,
        cluster: &Cluster,
        index: usize,
        member: &PlannedMember,
        before: Option<&MemberStatus>,
    ) -> Result<(), DefragFailure> {
        let deadline = Instant::now() + self.options.member_timeout;
        let mut sent = false;
        for attempt in 1..=DEFRAG_ATTEMPTS {
            // After a first call whose end is unknown, a stop leaves the member unknown.
            let unsent_state = if sent { MemberDefragState::Unknown } else { MemberDefragState::Stopped };
            self.check_stop(|| format!("member {} was not defragmented", member.name))
                .map_err(|f| DefragFailure::new(unsent_state, f))?;
            let client =
                self.member_client(cluster, member).await.map_err(|f| DefragFailure::new(unsent_state, f))?;
            let mut call = DefragCall::start(client);
            sent = true;
            // Until the call's end is known, the report says so: a run given up on now reports it.
            self.update_member(index, |m| {
                m.state = Some(MemberDefragState::Unknown);
                m.reason = "unknown: a defrag call was in flight when the run ended; etcd finishes \
                            a defrag it started, so the member may be defragmented"
                    .into();
            });
            tracing::info!(member = %member.name, attempt, "defragmenting");
            match tokio::time::timeout(self.options.defrag_call_timeout, call.answer()).await {
                Ok(CallEnd::Done) => return Ok(()),
                Ok(CallEnd::Failed(err)) => {
                    return Err(DefragFailure::new(
                        MemberDefragState::Failed,
                        Failure::retryable(format!("defragmenting member {} failed: {err}", member.name)),
                    ));
                }
                Ok(CallEnd::Cut) => {
                    tracing::info!(member = %member.name, "defrag call cut; checking the member")
                }
                Err(_elapsed) => {
                    tracing::info!(member = %member.name, "defrag call outlived its timeout; polling the member")
                }
            }
            match self.wait_defrag_over(cluster, member, before, &mut call, deadline).await? {
                DefragSeen::Done => return Ok(()),
                DefragSeen::NotEvident => continue,
            }
        }
        Err(DefragFailure::new(
            MemberDefragState::Failed,
            Failure::retryable(format!(
                "member {}: {DEFRAG_ATTEMPTS} defragment calls were cut and its sizes show no defrag \
                 (free pages unchanged); nothing more is touched, the Job may retry",
                member.name
            )),
        ))
    }

    /// A client for the member's own URL, without the cheap-call timeout: a defrag takes as long
    /// as it takes.
    async fn member_client(
        &self,
        cluster: &Cluster,
        member: &PlannedMember,
    ) -> Result<etcd_client::Client, Failure> {
        let url = cluster
            .member(member.id)
            .and_then(|m| m.url.clone())
            .ok_or_else(|| Failure::retryable(format!("member {} advertises no client URL", member.name)))?;
        let mut client = cluster
            .connection
            .client(&url, None)
            .await
            .map_err(|e| Failure::retryable(format!("cannot connect to member {}: {e}", member.name)))?;
        // A new connection to a shared URL may reach another member: make sure it is this one
        // before a defrag is sent through it.
        let status = tokio::time::timeout(LINEARIZABLE_READ_TIMEOUT, client.status())
            .await
            .map_err(|_| Failure::retryable(format!("member {} did not answer on {url}", member.name)))?
            .map_err(|e| {
                Failure::retryable(format!("member {} did not answer on {url}: {e}", member.name))
            })?;
        // Retryable: the next connection to a shared URL may reach the right member.
        answered_as(&status, member.id)
            .map_err(|why| Failure::retryable(format!("member {}: {why}", member.name)))?;
        Ok(client)
    }

    /// Polls while the call is not known to be over. A defrag blocks reads on its member: once a
    /// serializable read succeeds, the sizes tell whether a defrag ran.
    async fn wait_defrag_over(
        &self,
        cluster: &Cluster,
        member: &PlannedMember,
        before: Option<&MemberStatus>,
        call: &mut DefragCall,
        deadline: Instant,
    ) -> Result<DefragSeen, DefragFailure> {
        let mut last_error = String::from("no answer yet");
        let mut delay = PollDelay::new();
        while Instant::now() < deadline {
            match call.poll_end() {
                Some(CallEnd::Done) => return Ok(DefragSeen::Done),
                Some(CallEnd::Failed(err)) => {
                    return Err(DefragFailure::new(
                        MemberDefragState::Failed,
                        Failure::retryable(format!("defragmenting member {} failed: {err}", member.name)),
                    ));
                }
                Some(CallEnd::Cut) | None => {}
            }
            match self.serves_reads(cluster, member.id).await {
                Ok(()) => {
                    let now = cluster.status_of(member.id).await;
                    if let (Some(before), Ok(now)) = (before, &now)
                        && plan::defrag_evident(before, now)
                    {
                        return Ok(DefragSeen::Done);
                    }
                    // Still on its way (or never sent): wait for it; once it was cut, call again.
                    if call.was_cut() {
                        return Ok(DefragSeen::NotEvident);
                    }
                    last_error = "it serves reads, but the call has not answered and its sizes show no \
                                  defrag yet"
                        .into();
                }
                Err(err) => last_error = err,
            }
            delay.sleep().await;
        }
        Err(DefragFailure::new(
            MemberDefragState::Unknown,
            Failure::retryable(format!(
                "member {} did not finish its defrag within {:?}: {last_error}",
                member.name, self.options.member_timeout
            )),
        ))
    }

    async fn serves_reads(&self, cluster: &Cluster, id: u64) -> Result<(), String> {
        let mut client = cluster.client_of(id)?;
        let answer = client
            .get("groundskeeper/defrag-probe", Some(GetOptions::new().with_serializable()))
            .await
            .map_err(|e| e.to_string())?;
        match answer.header().map(|h| h.member_id()) {
            Some(answered) if answered == id => Ok(()),
            other => Err(format!("its URL was answered by member {:x}", other.unwrap_or_default())),
        }
    }

    /// Waits until `id` is healthy and has applied what the leader committed. A member that stops
    /// answering meanwhile stops the run at once.
    async fn wait_caught_up(&self, cluster: &Cluster, id: u64) -> Result<(), Failure> {
        let deadline = Instant::now() + self.options.member_timeout;
        let mut delay = PollDelay::new();
        loop {
            let observed = cluster.observe().await;
            // The defrag is over by now, so even `id` must answer: not answering is a failure.
            if let Some(sick) = observed.iter().find(|m| m.status.is_err()) {
                return Err(Failure::retryable(format!(
                    "member {} ({}) became unhealthy: {}; the run stopped and touches nothing more",
                    sick.name,
                    sick.id_hex(),
                    sick.unhealthy_because().unwrap_or_default()
                )));
            }
            if member_caught_up(&observed, id, self.options.plan.max_apply_lag) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let member = observed.iter().find(|m| m.id == id);
                return Err(Failure::retryable(format!(
                    "member {} did not become healthy and caught up within {:?}: {}",
                    member.map(|m| m.name.as_str()).unwrap_or("?"),
                    self.options.member_timeout,
                    member.and_then(|m| m.unhealthy_because()).unwrap_or_else(|| "lagging".into())
                )));
            }
            delay.sleep().await;
        }
    }

    /// Disarms the `NOSPACE` alarms the freed space allows, and says in the report which stay
    /// raised and why. Never fails the run: every member's work is done by now, and a retry would
    /// only do it again.
    async fn disarm_nospace(&self, cluster: &Cluster, defragmented: &[u64]) {
        if let Err(why) = self.try_disarm_nospace(cluster, defragmented).await {
            tracing::warn!("{why}");
            self.report.borrow_mut().warnings.push(format!(
                "the NOSPACE alarms were not checked: {why}; list them with `etcdctl alarm list` and \
                 disarm them with `etcdctl alarm disarm` once the members' db is under the quota"
            ));
        }
    }

    async fn try_disarm_nospace(&self, cluster: &Cluster, defragmented: &[u64]) -> Result<(), String> {
        let Some(mut client) = cluster.members.iter().find_map(|m| cluster.client_of(m.id).ok()) else {
            return Err("no member could be reached to list them".into());
        };
        let alarms = client
            .alarm(AlarmAction::Get, AlarmType::None, None)
            .await
            .map_err(|e| format!("cannot list alarms: {e}"))?;
        let alarmed: Vec<u64> = alarms
            .alarms()
            .iter()
            .filter(|a| a.alarm() == AlarmType::Nospace)
            .map(|a| a.member_id())
            .collect();
        if alarmed.is_empty() {
            return Ok(());
        }
        let after = cluster.observe().await;
        // The smallest quota any member states: a member's db under it is surely under its own.
        let quota = after
            .iter()
            .filter_map(|m| m.status.as_ref().ok())
            .filter_map(|s| {
                versions::trusted_quota(&s.version, s.db_size_quota, self.options.quota_backend_bytes)
            })
            .min()
            .or(self.options.quota_backend_bytes);
        let to_disarm = plan::alarms_to_disarm(&alarmed, &after, defragmented, quota);
        for &id in &alarmed {
            let left = match to_disarm.contains(&id) {
                true => self.disarm(&mut client, id).await.err(),
                false => Some(why_alarm_stays(status_size(&after, id), quota)),
            };
            if let Some(reason) = left {
                tracing::warn!(member = %format!("{id:x}"), "NOSPACE alarm left raised: {reason}");
                self.report.borrow_mut().alarms_left.push(AlarmLeft { member: format!("{id:x}"), reason });
            }
        }
        Ok(())
    }

    async fn disarm(&self, client: &mut etcd_client::Client, id: u64) -> Result<(), String> {
        let mut options = AlarmOptions::new();
        options.with_member(id);
        client
            .alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(options))
            .await
            .map_err(|e| format!("it could not be disarmed: {e}"))?;
        tracing::info!(member = %format!("{id:x}"), "NOSPACE alarm disarmed");
        self.report.borrow_mut().alarms_disarmed.push(format!("{id:x}"));
        Ok(())
    }
}

/// Why a member's `NOSPACE` alarm is not disarmed, with what to do.
fn why_alarm_stays(size: Option<i64>, quota: Option<i64>) -> String {
    let bytes = |b: i64| format!("{:.1} MiB ({b} bytes)", mib(b.max(0) as u64));
    match (size, quota) {
        (Some(size), Some(quota)) => format!(
            "its db is {} after the run, not under the quota of {}: etcd would refuse writes again at \
             once; compact further and defragment, delete data, or raise the quota (etcd's \
             --quota-backend-bytes, and this run's --quota-backend-bytes)",
            bytes(size),
            bytes(quota)
        ),
        (None, _) => {
            "its db size could not be read after the run: disarm it by hand once it is under the quota".into()
        }
        (Some(size), None) => format!(
            "its db is {} and it was not defragmented in this run, and the quota is not known: give \
             --quota-backend-bytes, or disarm it by hand once the db is under the quota",
            bytes(size)
        ),
    }
}

fn member_caught_up(observed: &[MemberObservation], id: u64, max_apply_lag: u64) -> bool {
    let leader = observed.iter().find(|m| m.id == id).and_then(|m| m.status.as_ref().ok()).map(|s| s.leader);
    let leader_index = observed
        .iter()
        .find(|m| Some(m.id) == leader)
        .and_then(|m| m.status.as_ref().ok())
        .map(|s| s.raft_index);
    match (observed.iter().find(|m| m.id == id), leader_index) {
        (Some(member), Some(index)) => plan::caught_up(member, index, max_apply_lag),
        _ => false,
    }
}

fn status_size(observed: &[MemberObservation], id: u64) -> Option<i64> {
    observed.iter().find(|m| m.id == id).and_then(|m| m.status.as_ref().ok()).map(|s| s.db_size)
}

/// A member the run did not defragment and will not: skipped, or planned in a dry run.
fn not_done(member: &PlannedMember, reason: &str) -> MemberDefrag {
    MemberDefrag {
        state: Some(match member.action {
            MemberAction::Skip => MemberDefragState::Skipped,
            _ => MemberDefragState::Planned,
        }),
        name: member.name.clone(),
        id: member.id_hex(),
        db_size_before: member.db_size,
        db_size_after: member.db_size,
        defragmented: false,
        duration_ms: 0,
        was_leader: member.was_leader,
        reason: match member.action {
            MemberAction::Skip => reason.to_owned(),
            _ if reason == member.reason => format!("would defragment: {reason}"),
            _ => reason.to_owned(),
        },
    }
}

/// A member whose turn never came.
fn not_reached(member: &PlannedMember, why: &str) -> MemberDefrag {
    MemberDefrag {
        state: Some(MemberDefragState::NotReached),
        reason: format!("not reached: {why}"),
        ..not_done(member, "")
    }
}

fn refusal_failure(refusal: Refusal) -> Failure {
    match refusal {
        // Retrying cannot add voting members: the Job should stop at once.
        Refusal::TooFewVotingMembers { .. } | Refusal::NoMembers => Failure::bad_input(refusal.to_string()),
        Refusal::Unhealthy { .. } | Refusal::NoStableLeader { .. } => Failure::retryable(refusal.to_string()),
    }
}

fn is_timeout(err: &etcd_client::Error) -> bool {
    let text = err.to_string().to_lowercase();
    text.contains("deadline") || text.contains("timed out") || text.contains("timeout")
}

/// The plan as a table for people (`--dry-run` and the logs).
pub fn plan_table(plan: &DefragPlan) -> String {
    let mut out =
        format!("{:<20} {:<17} {:>14} {:>14} {:<8} action\n", "member", "id", "dbSize", "inUse", "leader");
    for m in &plan.members {
        let action = match m.action {
            MemberAction::Defrag => "defrag",
            MemberAction::MoveLeaderThenDefrag => "move leadership, then defrag",
            MemberAction::LeaderDecidedAtTurn => {
                "defrag; in place or leadership moved first, by its predicted time"
            }
            MemberAction::Skip => "skip",
        };
        out.push_str(&format!(
            "{:<20} {:<17} {:>14} {:>14} {:<8} {action}: {}\n",
            m.name,
            m.id_hex(),
            m.db_size,
            m.db_size_in_use,
            if m.was_leader { "yes" } else { "" },
            m.reason
        ));
    }
    out
}

/// `groundskeeper-job defrag`: runs, reports, and returns the exit code.
pub fn main(args: DefragArgs) -> i32 {
    let result = match args.options() {
        Ok(options) => compact::runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(options.grace_period);
            run_defrag_until(&options, &stop, &mut log_progress).await
        }),
        Err(failure) => RunClock::start().finish(
            Report::Defrag(DefragReport { dry_run: args.dry_run, ..DefragReport::default() }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

fn log_progress(progress: Progress<'_>) {
    match progress {
        Progress::Compacted { revision, already } => {
            tracing::info!(revision, already_compacted = already, "compacted")
        }
        Progress::Planned(plan) => {
            eprint!("plan (leader {:x}, raft term {}):\n{}", plan.leader, plan.raft_term, plan_table(plan))
        }
        Progress::LeaderTurnDecided(turn) => {
            tracing::info!(member = %turn.member, choice = ?turn.choice, "leader's turn: {}", turn.reason)
        }
        Progress::LeaderMoved { from, to } => tracing::info!(from, to, "leadership moved"),
        Progress::MemberStarted(m) => tracing::info!(member = %m.name, "defrag started"),
        Progress::MemberDone(m) => tracing::info!(
            member = %m.name,
            before = m.db_size_before,
            after = m.db_size_after,
            duration_ms = m.duration_ms,
            "defragmented and caught up"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::ErrorKind;

    fn args() -> DefragArgs {
        DefragArgs {
            connection: EndpointArgs {
                endpoints: vec!["http://127.0.0.1:2379".into()],
                ..EndpointArgs::default()
            },
            min_defrag_bytes: plan::DEFAULT_MIN_DEFRAG_BYTES,
            max_fragmented_percent: plan::DEFAULT_MAX_FRAGMENTED_PERCENT,
            compact_retain_revisions: None,
            compact_not_past: None,
            leader_turn: LeaderTurnPolicy::Auto,
            no_move_leader: false,
            leader_in_place_budget_seconds: None,
            refuse_affected_versions: false,
            quota_backend_bytes: None,
            catch_up_timeout_seconds: 30,
            allow_single_member: false,
            dry_run: false,
            not_after: None,
            window_opened: None,
            expected_rates: Vec::new(),
            defrag_call_timeout_ms: 60_000,
            member_timeout_seconds: 600,
            result_file: "/dev/null".into(),
            grace_period_seconds: 60,
        }
    }

    #[test]
    fn the_window_flags_are_checked_naming_the_flag() {
        let mut a = args();
        a.not_after = Some("2026-11-25T05:00:00Z".into());
        a.expected_rates = vec!["etcd-0=52428800".into(), "my=odd=name=1000".into()];
        let window = a.options().unwrap().window.unwrap();
        assert_eq!(window.not_after, "2026-11-25T05:00:00Z".parse().unwrap());
        assert_eq!(window.rates.get("etcd-0"), Some(&52428800.0));
        assert_eq!(window.rates.get("my=odd=name"), Some(&1000.0), "member names may hold '='");
        const END: Option<&str> = Some("2026-11-25T05:00:00Z");
        for (not_after, opened, rates, words) in [
            (Some("tomorrow"), None, vec![], "--not-after \"tomorrow\": not a time"),
            (END, None, vec!["etcd-0"], "--expected-rate \"etcd-0\": give NAME=BYTES_PER_SECOND"),
            (END, None, vec!["etcd-0=-5"], "give NAME=BYTES_PER_SECOND"),
            (END, None, vec!["etcd-0=1e-300"], "give NAME=BYTES_PER_SECOND"),
            (END, None, vec!["=5"], "give NAME=BYTES_PER_SECOND"),
            (None, None, vec!["etcd-0=5"], "--expected-rate is for --not-after"),
            (
                END,
                Some("2026-11-25T06:00:00Z"),
                vec![],
                "--window-opened 2026-11-25T06:00:00Z is not before --not-after",
            ),
            (END, Some("2026-11-25T05:00:00Z"), vec![], "is not before --not-after 2026-11-25T05:00:00Z"),
            (END, Some("yesterday"), vec![], "--window-opened \"yesterday\": not a time"),
            (END, None, vec!["etcd-0=5", "etcd-0=7"], "names member \"etcd-0\" twice"),
        ] {
            let mut a = args();
            a.not_after = not_after.map(Into::into);
            a.window_opened = opened.map(Into::into);
            a.expected_rates = rates.into_iter().map(Into::into).collect();
            let err = a.options().unwrap_err();
            assert_eq!(err.kind, ErrorKind::BadInput);
            assert!(err.message.contains(words), "{}", err.message);
        }
    }

    #[test]
    fn flags_become_the_policy() {
        let mut a = args();
        a.no_move_leader = true;
        a.allow_single_member = true;
        a.compact_retain_revisions = Some(10);
        let options = a.options().unwrap();
        assert_eq!(options.policy, DefragPolicy::default());
        assert_eq!(options.plan.leader_turn, LeaderTurnPolicy::Never, "--no-move-leader is never");
        assert!(options.plan.allow_single_member);
        assert_eq!(options.compact_retain_revisions, Some(10));
    }

    #[test]
    fn bad_flags_are_bad_input_naming_the_flag() {
        type Change = fn(&mut DefragArgs);
        let cases: Vec<(Change, &str)> = vec![
            (|a| a.min_defrag_bytes = -1, "--min-defrag-bytes"),
            (|a| a.max_fragmented_percent = 101.0, "--max-fragmented-percent"),
            (|a| a.max_fragmented_percent = -0.5, "--max-fragmented-percent"),
            (|a| a.defrag_call_timeout_ms = 0, "--defrag-call-timeout-ms"),
            (|a| a.connection.endpoints = vec!["http://127.0.0.1:0".into()], "port 0"),
            (|a| a.connection.endpoints = vec!["http://:2379".into()], "--endpoints"),
            (|a| a.connection.endpoints = vec!["http://127.0.0.1:99999".into()], "not a URL"),
            (
                |a| a.connection.endpoints = vec!["http://user@127.0.0.1:2379".into()],
                "scheme://host:port only",
            ),
            (|a| a.member_timeout_seconds = 0, "--member-timeout-seconds"),
            (|a| a.grace_period_seconds = 0, "--grace-period-seconds"),
            (|a| a.member_timeout_seconds = u64::MAX, "--member-timeout-seconds"),
            (|a| a.compact_retain_revisions = Some(-3), "--compact-retain-revisions"),
            (|a| a.connection.endpoints = vec!["127.0.0.1:2379".into()], "must start with http"),
            (|a| a.connection.endpoints = vec![" ".into()], "no endpoint given"),
            (|a| a.connection.endpoints = vec!["https://e:2379".into()], "--cacert is required"),
            (|a| a.connection.cert = Some("/c.pem".into()), "--cert needs --cacert"),
            (|a| a.connection.cacert = Some("/nonexistent/ca.pem".into()), "--cacert /nonexistent/ca.pem"),
        ];
        for (change, want) in cases {
            let mut a = args();
            change(&mut a);
            let failure = a.options().expect_err(want);
            assert_eq!(failure.kind, ErrorKind::BadInput, "{want}");
            assert!(failure.message.contains(want), "{want}: {}", failure.message);
        }
    }

    #[test]
    fn tls_files_must_hold_what_they_claim() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let mut a = args();
        a.connection.endpoints = vec!["https://127.0.0.1:2379".into()];
        a.connection.cacert = Some(junk);
        let failure = a.options().unwrap_err();
        assert_eq!(failure.kind, ErrorKind::BadInput);
        assert!(failure.message.contains("no PEM certificate"), "{}", failure.message);
    }
}

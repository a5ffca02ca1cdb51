//! The leader's turn: defragment it in place, or move leadership away first. A pure function of
//! the policy, the in-place budget and what this run measured on the followers.
//!
//! A leader defragmenting in place blocks every write of the cluster for the length of its defrag
//! but causes no election; moving leadership first costs clients the requests in flight at the
//! old leader (`leader changed`, proposals dropped, a write left to etcd's request timeout). In
//! the client-latency benchmark (`docs/benchmarks.md`) the transfer cost more than a short
//! in-place defrag, so `Auto` keeps the leader in place while its predicted defrag fits the
//! budget and moves leadership only for a longer one.

use std::time::Duration;

use groundskeeper_protocol::operation::LeaderTurnPolicy;

use super::plan::DEFAULT_DEFRAG_BYTES_PER_SECOND;

/// The default in-place budget, 5 s. In the client benchmark (`docs/benchmarks.md`), leaders
/// defragmented in place for up to 5.5 s failed no request and lost no lease, while a transfer
/// failed writes in most runs; actual leader defrags were up to 1.6 times the prediction, so 5 s
/// keeps an in-place defrag under etcd's 7 s request timeout. It is also half of the 10 s renew
/// deadline of Kubernetes' leader election.
pub const DEFAULT_IN_PLACE_BUDGET: Duration = Duration::from_secs(5);

/// One follower's defrag in this run: its db size before, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasuredDefrag {
    pub bytes: i64,
    pub duration: Duration,
}

/// A defrag timed at less than this was not timed at all. A short one still counts: the call's
/// own overhead only makes its rate look slower, so the prediction errs towards moving
/// leadership.
const MIN_MEASURED: Duration = Duration::from_millis(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnChoice {
    InPlace,
    TransferFirst,
}

/// Where the rate of a prediction came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateFrom {
    /// The median of this many followers' defrags in this run.
    ThisRun(usize),
    /// The leader's own earlier defrags (history passed in by the controller).
    Earlier,
    /// No measurement: [`DEFAULT_DEFRAG_BYTES_PER_SECOND`], a quarter of the rate measured.
    Default,
}

impl RateFrom {
    pub fn describe(self) -> String {
        match self {
            RateFrom::ThisRun(n) => format!("this run's followers ({n})"),
            RateFrom::Earlier => "its earlier defrags".to_owned(),
            RateFrom::Default => "the default rate (no follower measured)".to_owned(),
        }
    }
}

/// What was decided for the leader, and on what.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderTurnDecision {
    pub choice: TurnChoice,
    pub predicted: Duration,
    pub rate: f64,
    pub rate_from: RateFrom,
    pub reason: String,
}

/// What the decision is made on.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderTurnFacts<'a> {
    pub policy: LeaderTurnPolicy,
    pub budget: Duration,
    /// The leader's db size now.
    pub leader_db_size: i64,
    /// This run's followers, each defragmented and timed.
    pub measured: &'a [MeasuredDefrag],
    /// The leader's own rate from earlier defrags, when the controller passed one.
    pub earlier_rate: Option<f64>,
    /// The leader reports a non-blocking defrag: it does not block writes, so it needs no
    /// transfer whatever its size.
    pub non_blocking: bool,
}

/// Decides the leader's turn. `Never` and `Always` are the policy's; `Auto` predicts the
/// leader's defrag from the followers' median rate (else its earlier rate, else the default)
/// and keeps it in place when the prediction fits the budget.
pub fn decide_leader_turn(facts: &LeaderTurnFacts<'_>) -> LeaderTurnDecision {
    let (rate, rate_from) = rate_of(facts.measured, facts.earlier_rate);
    // An absurd rate (a history entry of a few bytes over hours) predicts "very long", not a panic.
    let predicted =
        Duration::try_from_secs_f64(facts.leader_db_size.max(0) as f64 / rate).unwrap_or(Duration::MAX);
    let prediction = format!(
        "predicted {:.1}s ({} at {:.1} MiB/s from {})",
        predicted.as_secs_f64(),
        human_size(facts.leader_db_size),
        rate / MIB,
        rate_from.describe()
    );
    let budget = facts.budget.as_secs_f64();
    let (choice, reason) = match facts.policy {
        LeaderTurnPolicy::Never => (TurnChoice::InPlace, format!("policy Never: in place ({prediction})")),
        LeaderTurnPolicy::Always => {
            (TurnChoice::TransferFirst, format!("policy Always: leadership moves first ({prediction})"))
        }
        LeaderTurnPolicy::Auto if facts.non_blocking => (
            TurnChoice::InPlace,
            format!("the leader reports a non-blocking defrag: in place, no transfer needed ({prediction})"),
        ),
        LeaderTurnPolicy::Auto if predicted <= facts.budget => {
            (TurnChoice::InPlace, format!("{prediction} ≤ the {budget:.1}s budget: in place, no transfer"))
        }
        LeaderTurnPolicy::Auto => (
            TurnChoice::TransferFirst,
            format!("{prediction} > the {budget:.1}s budget: leadership moves first"),
        ),
    };
    LeaderTurnDecision { choice, predicted, rate, rate_from, reason }
}

const MIB: f64 = 1024.0 * 1024.0;

/// The median of the followers' rates, else the earlier rate, else the default.
fn rate_of(measured: &[MeasuredDefrag], earlier: Option<f64>) -> (f64, RateFrom) {
    let mut rates: Vec<f64> = measured
        .iter()
        .filter(|m| m.bytes > 0 && m.duration >= MIN_MEASURED)
        .map(|m| m.bytes as f64 / m.duration.as_secs_f64())
        .collect();
    if !rates.is_empty() {
        rates.sort_by(f64::total_cmp);
        let n = rates.len();
        let median = if n % 2 == 1 { rates[n / 2] } else { (rates[n / 2 - 1] + rates[n / 2]) / 2.0 };
        return (median, RateFrom::ThisRun(n));
    }
    match earlier.filter(|r| r.is_finite() && *r > 0.0) {
        Some(rate) => (rate, RateFrom::Earlier),
        None => (DEFAULT_DEFRAG_BYTES_PER_SECOND, RateFrom::Default),
    }
}

/// `312.4 MiB (327581696 bytes)`.
fn human_size(bytes: i64) -> String {
    format!("{:.1} MiB ({bytes} bytes)", bytes as f64 / MIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: i64 = 1_000_000;

    fn measured(pairs: &[(i64, u64)]) -> Vec<MeasuredDefrag> {
        pairs
            .iter()
            .map(|(bytes, ms)| MeasuredDefrag { bytes: *bytes, duration: Duration::from_millis(*ms) })
            .collect()
    }

    #[test]
    fn the_leaders_turn_is_decided_by_policy_and_prediction() {
        // (name, policy, leader size, followers (bytes, ms), earlier rate, non-blocking,
        //  want choice, want predicted ms, want rate from)
        type Case = (
            &'static str,
            LeaderTurnPolicy,
            i64,
            &'static [(i64, u64)],
            Option<f64>,
            bool,
            TurnChoice,
            u64,
            RateFrom,
        );
        let cases: [Case; 10] = [
            (
                "auto, small leader: in place",
                LeaderTurnPolicy::Auto,
                300 * MB,
                &[(300 * MB, 1500), (300 * MB, 1500)],
                None,
                false,
                TurnChoice::InPlace,
                1500,
                RateFrom::ThisRun(2),
            ),
            (
                "auto, large leader: transfer first",
                LeaderTurnPolicy::Auto,
                6000 * MB,
                &[(1000 * MB, 1000), (1000 * MB, 2000)],
                None,
                false,
                TurnChoice::TransferFirst,
                8000,
                RateFrom::ThisRun(2),
            ),
            (
                "auto, exactly the budget: in place",
                LeaderTurnPolicy::Auto,
                500 * MB,
                &[(100 * MB, 1000)],
                None,
                false,
                TurnChoice::InPlace,
                5000,
                RateFrom::ThisRun(1),
            ),
            (
                "auto, median of three (one slow outlier ignored)",
                LeaderTurnPolicy::Auto,
                600 * MB,
                &[(100 * MB, 1000), (100 * MB, 1000), (100 * MB, 60_000)],
                None,
                false,
                TurnChoice::TransferFirst,
                6000,
                RateFrom::ThisRun(3),
            ),
            (
                "auto, no follower timed: earlier rate",
                LeaderTurnPolicy::Auto,
                400 * MB,
                &[(MB, 0)],
                Some(100.0 * MB as f64),
                false,
                TurnChoice::InPlace,
                4000,
                RateFrom::Earlier,
            ),
            (
                "auto, nothing measured: the cautious default rate",
                LeaderTurnPolicy::Auto,
                300 * MB,
                &[],
                None,
                false,
                TurnChoice::TransferFirst,
                5722,
                RateFrom::Default,
            ),
            (
                "auto, non-blocking defrag: in place whatever its size",
                LeaderTurnPolicy::Auto,
                8000 * MB,
                &[(1000 * MB, 1000)],
                None,
                true,
                TurnChoice::InPlace,
                8000,
                RateFrom::ThisRun(1),
            ),
            (
                "always: transfer even when short",
                LeaderTurnPolicy::Always,
                10 * MB,
                &[(100 * MB, 1000)],
                None,
                false,
                TurnChoice::TransferFirst,
                100,
                RateFrom::ThisRun(1),
            ),
            (
                "never: in place even when long",
                LeaderTurnPolicy::Never,
                8000 * MB,
                &[(100 * MB, 1000)],
                None,
                false,
                TurnChoice::InPlace,
                80_000,
                RateFrom::ThisRun(1),
            ),
            (
                "a zero-byte follower is no measurement",
                LeaderTurnPolicy::Auto,
                100 * MB,
                &[(0, 1000)],
                None,
                false,
                TurnChoice::InPlace,
                1907,
                RateFrom::Default,
            ),
        ];
        for (name, policy, leader, followers, earlier, non_blocking, choice, predicted_ms, from) in cases {
            let measured = measured(followers);
            let decision = decide_leader_turn(&LeaderTurnFacts {
                policy,
                budget: DEFAULT_IN_PLACE_BUDGET,
                leader_db_size: leader,
                measured: &measured,
                earlier_rate: earlier,
                non_blocking,
            });
            assert_eq!(decision.choice, choice, "{name}: {}", decision.reason);
            assert_eq!(decision.predicted.as_millis() as u64, predicted_ms, "{name}");
            assert_eq!(decision.rate_from, from, "{name}");
            assert!(decision.reason.contains("predicted"), "{name}: {}", decision.reason);
        }
    }

    #[test]
    fn the_reason_names_prediction_budget_and_source() {
        let measured = measured(&[(200 * MB, 1000)]);
        let decision = decide_leader_turn(&LeaderTurnFacts {
            policy: LeaderTurnPolicy::Auto,
            budget: Duration::from_secs(2),
            leader_db_size: 600 * MB,
            measured: &measured,
            earlier_rate: None,
            non_blocking: false,
        });
        assert_eq!(
            decision.reason,
            "predicted 3.0s (572.2 MiB (600000000 bytes) at 190.7 MiB/s from this run's followers (1)) \
             > the 2.0s budget: leadership moves first"
        );
    }
}

//! Annotation and label keys.
//!
//! The `internal.scylla-operator.scylladb.com/*` and `scylla*` keys are scylla-operator's own:
//! groundskeeper reads and writes them exactly as scylla-operator does, so that both can look
//! after the same cluster. The `groundskeeper.dev/*` keys are groundskeeper's.

/// On a member Service: hash of the whole token ring as that node sees it now.
pub const CURRENT_TOKEN_RING_HASH: &str = "internal.scylla-operator.scylladb.com/current-token-ring-hash";
/// On a member Service: the ring hash the node was last cleaned up for.
pub const LAST_CLEANED_UP_TOKEN_RING_HASH: &str =
    "internal.scylla-operator.scylladb.com/last-cleaned-up-token-ring-hash";
/// On a cleanup Job and its pod template: the ring hash this Job cleans for.
pub const CLEANUP_TOKEN_RING_HASH: &str = "internal.scylla-operator.scylladb.com/cleanup-token-ring-hash";
/// Value of `last-cleaned-up-token-ring-hash` written by newer scylla-operators: "clean once".
pub const NEVER_CLEANED_UP: &str = "NeverCleanedUp";

/// Label on every object scylla-operator creates for a ScyllaCluster: the cluster's name.
pub const SCYLLA_CLUSTER_LABEL: &str = "scylla/cluster";
/// Label on member Services and pods: the datacenter name.
pub const SCYLLA_DATACENTER_LABEL: &str = "scylla/datacenter";
/// Label on member Services and pods: the rack name.
pub const SCYLLA_RACK_LABEL: &str = "scylla/rack";
/// Label telling member Services (one per node) from the cluster's other Services.
pub const SCYLLA_SERVICE_TYPE_LABEL: &str = "scylla-operator.scylladb.com/scylla-service-type";
/// Value of [`SCYLLA_SERVICE_TYPE_LABEL`] on member Services.
pub const SCYLLA_SERVICE_TYPE_MEMBER: &str = "member";

/// Port of the Scylla Manager Agent (HTTPS, bearer token).
pub const SCYLLA_AGENT_PORT: u16 = 10001;
/// Key of the agent token in the `<cluster>-auth-token` Secret (YAML `auth_token: <token>`).
pub const SCYLLA_AGENT_TOKEN_SECRET_KEY: &str = "auth-token.yaml";

/// On a ScyllaCluster or EtcdCluster: `"false"` turns groundskeeper's automatic maintenance off.
pub const MAINTENANCE_ENABLED: &str = "groundskeeper.dev/maintenance-enabled";
/// On a ScyllaCluster: how many nodes of one rack may be cleaned up at the same time (default 1).
pub const CLEANUP_MAX_PER_RACK: &str = "groundskeeper.dev/cleanup-max-concurrent-per-rack";
/// On a ScyllaCluster: how many nodes of the whole cluster may be cleaned up at the same time
/// (default: no bound beyond the per-rack one).
pub const CLEANUP_MAX_PER_CLUSTER: &str = "groundskeeper.dev/cleanup-max-concurrent";

/// Label on everything groundskeeper creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "groundskeeper";
/// Label on Jobs: what they do (`cleanup`, `defrag`, `compact`, `snapshot`).
pub const OPERATION_LABEL: &str = "groundskeeper.dev/operation";
/// Label on Jobs: the name of the cluster they work on.
pub const TARGET_LABEL: &str = "groundskeeper.dev/target";
/// Label on per-node Jobs: the node (member Service) they work on.
pub const NODE_LABEL: &str = "groundskeeper.dev/node";

/// On a member Service, next to `last-cleaned-up-token-ring-hash`: JSON `{"ringHash": …,
/// "members": [UIDs of every member Service]}` when every member agreed on that ring. Lets the
/// controller tell a scale-in (nodes only left: nobody lost ranges) from a change that needs cleanup.
pub const CLEANED_FOR_MEMBERS: &str = "groundskeeper.dev/cleaned-for-members";
/// On a member Service: what the node replicated, per vnode keyspace, when it was last cleaned
/// (JSON: keyspaces grouped by identical range sets, each set delta-encoded). Written only after
/// a cleanup succeeded; the ownership rule compares it with what the node replicates now.
pub const OWNED_AT_LAST_CLEANUP: &str = "groundskeeper.dev/owned-at-last-cleanup";
/// On a member Service: when groundskeeper's ring observer last wrote `current-token-ring-hash`
/// (RFC 3339). Marks the hash as groundskeeper's to keep up to date.
pub const RING_HASH_OBSERVED_AT: &str = "groundskeeper.dev/ring-hash-observed-at";

/// Label on a MaintenanceTask: who asked for it, [`ORIGIN_AUTOMATIC`] (one of groundskeeper's
/// triggers), [`ORIGIN_SCHEDULE`] (a MaintenanceSchedule) or [`ORIGIN_MANUAL`] (a person). Lets people list, and clean up, their own tasks.
pub const ORIGIN_LABEL: &str = "groundskeeper.dev/origin";
/// Value of [`ORIGIN_LABEL`] on tasks groundskeeper's triggers create.
pub const ORIGIN_AUTOMATIC: &str = "automatic";
/// Value of [`ORIGIN_LABEL`] on tasks people create.
pub const ORIGIN_MANUAL: &str = "manual";
/// Value of [`ORIGIN_LABEL`] on the Snapshot and Delta tasks of an EtcdCluster's backup policy
/// (`spec.backup`): they do not wait for maintenance windows.
pub const ORIGIN_BACKUP_POLICY: &str = "backup-policy";
/// Value of [`ORIGIN_LABEL`] on tasks a MaintenanceSchedule makes.
pub const ORIGIN_SCHEDULE: &str = "schedule";
/// Label on a Job run for a MaintenanceTask: the task's name (the task owns the Job too).
pub const TASK_LABEL: &str = "groundskeeper.dev/task";
/// Label on a task's Job: which step of the task it runs, from 0.
pub const TASK_STEP_LABEL: &str = "groundskeeper.dev/task-step";
/// Prefix of Job names another controller owns in the namespaces groundskeeper creates Jobs in:
/// scylla-operator's cleanup Jobs are `cleanup-<member Service>`. groundskeeper never gives a Job
/// such a name.
pub const RESERVED_JOB_NAME_PREFIX: &str = "cleanup-";

/// Annotation on a ScyllaCluster: its maintenance windows, `;`-separated, e.g.
/// `Mon-Fri 01:00-05:00; Sat 22:00-06:00` (automatic cleanups start only inside them).
pub const MAINTENANCE_WINDOWS: &str = "groundskeeper.dev/maintenance-windows";
/// Annotation on a ScyllaCluster: the IANA time zone of [`MAINTENANCE_WINDOWS`] (default UTC).
pub const MAINTENANCE_TIME_ZONE: &str = "groundskeeper.dev/maintenance-time-zone";

/// Annotation on a ScyllaCluster: `"true"` makes its automatic cleanups wait for a person's
/// approval of their plan (`spec.requireApproval` of the tasks the trigger creates); any value
/// but `"false"` does, so that a typo holds the work for review rather than running it.
pub const REQUIRE_APPROVAL: &str = "groundskeeper.dev/require-approval";
/// Annotation on a MaintenanceTask that asks for approval: the id of the plan (`status.plan.id`)
/// a person approved. A task starts only when it equals the plan it would run now.
pub const APPROVED_PLAN: &str = "groundskeeper.dev/approved-plan";
/// Annotation on a Scylla member Service: the node's last cleanups (at most 5, oldest first),
/// `<load bytes or ?>:<seconds>@<job>` comma-separated, from which the next cleanup's duration
/// is expected.
pub const CLEANUP_HISTORY: &str = "groundskeeper.dev/cleanup-history";

//! Scylla node cleanup after scaling: observe (read the ScyllaCluster, its member Services, our
//! Jobs) → decide (pure) → apply (annotation patches, Jobs, Events) → status (conditions).
//! The ring observer writes `current-token-ring-hash` where nothing else does.

pub mod apply;
pub mod coexistence;
pub mod decide;
pub mod observe;
pub mod ownership;
pub mod ownership_reader;
pub mod reconcile;
pub mod ring_observer;

pub use reconcile::run;
pub use ring_observer::run_ring_observer;

//! Scylla node cleanup after scaling: observe (read the ScyllaCluster, its member Services, our
//! Jobs) → decide (pure) → apply (annotation patches, Jobs, Events) → status (conditions).
//! The ring observer writes `current-token-ring-hash` where nothing else does.

pub mod apply;
pub mod controller;
pub mod decide;
pub mod observe;
pub mod ring_observer;

pub use controller::run;
pub use ring_observer::run_ring_observer;

//! The integration tests of this crate, in one binary (one link, one process): each module
//! is one area.

mod e2e;
mod kubectl;

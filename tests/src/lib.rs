//! Support for groundskeeper's end-to-end scenarios.

pub mod apiserver;

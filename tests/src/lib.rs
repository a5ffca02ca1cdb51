//! Stand-ins for everything groundskeeper talks to, for tests that cannot reach the real thing:
//! an in-memory Kubernetes API, a Scylla Manager Agent that follows Scylla's REST API description,
//! the objects scylla-operator writes, and throwaway etcd clusters on loopback (those are real
//! etcd); and the Job controller with the kubelet, running Jobs' containers through a function
//! the scenario supplies. `examples/demo/` puts them all together around the controller.

pub mod apiserver;
pub mod etcd_cluster;
pub mod etcd_writes;
pub mod fixtures;
pub mod kubectl;
pub mod kubelet;
pub mod measure;
pub mod net;
pub mod peer_network;
pub mod prometheus;
pub mod reference;
pub mod s3_fault_proxy;
pub mod s3_server;
pub mod scylla_agent;
pub mod scylla_operator;
pub mod statefulset;
pub mod wait;

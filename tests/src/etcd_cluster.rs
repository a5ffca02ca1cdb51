//! Throwaway etcd clusters (real etcd 3.4 or 3.5) on loopback ports, for tests and benchmarks.

//! etcd compaction and defragmentation: the EtcdCluster controller.

//! Fleets of partitioned etcd clusters: the clusters serving one Kubernetes API, each with its
//! own cluster id (bits 13–18 of its revisions when they are composite). Two clusters of one fleet
//! that claim the same id would write colliding revisions; both are reported and neither is
//! maintained until one of them changes.

use groundskeeper_api::etcd_cluster::EtcdPartition;

/// A cluster as the fleet check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FleetMember {
    pub namespace: String,
    pub name: String,
    pub partition: Option<EtcdPartition>,
}

impl FleetMember {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The other clusters (`namespace/name`, sorted) of `me`'s fleet that claim its cluster id;
/// empty when `me` belongs to no fleet.
pub(crate) fn id_collisions(me: &FleetMember, all: &[FleetMember]) -> Vec<String> {
    let Some(mine) = &me.partition else {
        return Vec::new();
    };
    let mut others: Vec<String> = all
        .iter()
        .filter(|other| other.key() != me.key())
        .filter(|other| {
            other.partition.as_ref().is_some_and(|p| p.fleet == mine.fleet && p.cluster_id == mine.cluster_id)
        })
        .map(FleetMember::key)
        .collect();
    others.sort();
    others.dedup();
    others
}

/// The Degraded message of a cluster whose id is also claimed by `others`.
pub(crate) fn collision_message(partition: &EtcdPartition, others: &[String]) -> String {
    format!(
        "spec.partition.clusterId {} of fleet {} is also claimed by EtcdCluster {}: their revisions \
         would collide; neither is maintained until each cluster of the fleet has an id of its own",
        partition.cluster_id,
        partition.fleet,
        others.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::etcd_cluster::RevisionScheme;

    fn member(namespace: &str, name: &str, partition: Option<(&str, i32)>) -> FleetMember {
        FleetMember {
            namespace: namespace.into(),
            name: name.into(),
            partition: partition.map(|(fleet, cluster_id)| EtcdPartition {
                fleet: fleet.into(),
                cluster_id,
                revision_scheme: RevisionScheme::Partitioned,
                max_clock_skew_ms: None,
            }),
        }
    }

    #[test]
    fn collisions_are_within_one_fleet_and_one_id() {
        let all = vec![
            member("a", "system", Some(("arktos", 0))),
            member("a", "tenant-1", Some(("arktos", 1))),
            member("b", "tenant-1b", Some(("arktos", 1))),
            member("a", "other-fleet", Some(("elsewhere", 1))),
            member("a", "alone", None),
        ];
        let cases: Vec<(&str, &FleetMember, Vec<&str>)> = vec![
            ("a unique id", &all[0], vec![]),
            ("the same id in another namespace", &all[1], vec!["b/tenant-1b"]),
            ("both sides are told", &all[2], vec!["a/tenant-1"]),
            ("another fleet may use the id", &all[3], vec![]),
            ("no fleet, no collision", &all[4], vec![]),
        ];
        for (name, me, expected) in cases {
            assert_eq!(id_collisions(me, &all), expected, "{name}");
        }
        let message = collision_message(all[1].partition.as_ref().unwrap(), &["b/tenant-1b".into()]);
        assert!(
            message.starts_with(
                "spec.partition.clusterId 1 of fleet arktos is also claimed by EtcdCluster b/tenant-1b"
            ),
            "{message}"
        );
    }
}

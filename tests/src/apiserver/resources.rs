//! The resource types the server knows, and the per-type rules the real API applies to them.

use std::collections::BTreeMap;

/// Identifies a resource type the way its URL does: group ("" for core), version, plural.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    pub group: String,
    pub version: String,
    pub plural: String,
}

impl ResourceId {
    pub fn new(group: &str, version: &str, plural: &str) -> Self {
        ResourceId { group: group.to_string(), version: version.to_string(), plural: plural.to_string() }
    }

    /// The resource type of a kube/k8s-openapi type, e.g. `ResourceId::of::<Job>()`.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        ResourceId::new(&K::group(&()), &K::version(&()), &K::plural(&()))
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// Whether and when `metadata.generation` is maintained, as the real API does per type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// Not set at all (ConfigMap, Secret, Service, Pod, Event, Lease, Namespace).
    Untracked,
    /// Starts at 1 and goes up when anything outside `metadata` changes — outside `metadata`
    /// and `status` when the type has a status subresource — and when deletion starts.
    /// That is the rule for custom resources and for the workload types such as Jobs.
    Tracked,
}

/// What a DELETE does to dependents when the request names no `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are deleted (Background and Foreground are treated alike: at once).
    Delete,
    /// Dependents lose their owner reference and stay (batch/v1 Jobs default to this over the API).
    Orphan,
}

/// A resource type served by the API server.
#[derive(Clone, Debug)]
pub struct ResourceType {
    pub id: ResourceId,
    pub kind: String,
    pub namespaced: bool,
    pub status_subresource: bool,
    pub generation: Generation,
    pub default_propagation: Propagation,
    /// Built-in types accept strategic merge patches; custom resources answer 415, as the real API.
    pub strategic_merge: bool,
}

impl ResourceType {
    /// A custom resource: generation tracked, strategic merge patch refused, dependents deleted.
    pub fn custom(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        ResourceType {
            id: ResourceId::new(group, version, plural),
            kind: kind.to_string(),
            namespaced,
            status_subresource,
            generation: Generation::Tracked,
            default_propagation: Propagation::Delete,
            strategic_merge: false,
        }
    }

    fn builtin(group: &str, version: &str, plural: &str, kind: &str, status_subresource: bool) -> Self {
        ResourceType {
            strategic_merge: true,
            generation: Generation::Untracked,
            ..ResourceType::custom(group, version, plural, kind, true, status_subresource)
        }
    }

    /// `configmaps` for core types, `jobs.batch` otherwise, as the API names them in messages.
    pub fn qualified_plural(&self) -> String {
        if self.id.group.is_empty() {
            self.id.plural.clone()
        } else {
            format!("{}.{}", self.id.plural, self.id.group)
        }
    }

    /// `ConfigMap` for core types, `Job.batch` otherwise, as validation messages name them.
    pub fn qualified_kind(&self) -> String {
        if self.id.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.id.group) }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The CRD version serving this type, for custom resources that have one (see [`super::crds`]).
    pub fn crd(&self) -> Option<&'static super::crds::CrdVersion> {
        if self.strategic_merge {
            return None;
        }
        super::crds::crd_version(&self.id)
    }

    /// The CRD schema custom resources of this type are held to (see [`super::schema`]): pruned,
    /// defaulted and validated on every write. `None` for built-ins and custom resources whose
    /// CRD is not at hand.
    pub fn schema(&self) -> Option<&'static super::schema::Schema> {
        super::schema::schema_of(self)
    }

    /// The CRD's `additionalPrinterColumns`, for custom resources that have a CRD here (an empty
    /// list when it declares none: then the API shows `Name` and `Age`).
    pub fn printer_columns(&self) -> Option<Vec<super::table::PrinterColumn>> {
        let crd = self.crd()?;
        let mut columns = super::table::PrinterColumn::of_version(&crd.version);
        if crd.version.get("additionalPrinterColumns").is_none() {
            columns.push(super::table::PrinterColumn::age());
        }
        Some(columns)
    }
}

/// The built-in types a groundskeeper controller touches.
pub fn builtin_types() -> Vec<ResourceType> {
    let mut jobs = ResourceType::builtin("batch", "v1", "jobs", "Job", true);
    jobs.generation = Generation::Tracked;
    jobs.default_propagation = Propagation::Orphan;
    let mut statefulsets = ResourceType::builtin("apps", "v1", "statefulsets", "StatefulSet", true);
    statefulsets.generation = Generation::Tracked;
    let namespaces = ResourceType {
        namespaced: false,
        ..ResourceType::builtin("", "v1", "namespaces", "Namespace", true)
    };
    // Arktos's StorageCluster: a core type there, cluster-scoped, without a status.
    let storage_clusters = ResourceType {
        namespaced: false,
        ..ResourceType::builtin("", "v1", "storageclusters", "StorageCluster", false)
    };
    vec![
        storage_clusters,
        ResourceType::builtin("", "v1", "services", "Service", true),
        ResourceType::builtin("", "v1", "secrets", "Secret", false),
        ResourceType::builtin("", "v1", "configmaps", "ConfigMap", false),
        ResourceType::builtin("", "v1", "pods", "Pod", true),
        ResourceType::builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true),
        ResourceType::builtin("", "v1", "events", "Event", false),
        namespaces,
        jobs,
        statefulsets,
        ResourceType::builtin("coordination.k8s.io", "v1", "leases", "Lease", false),
        ResourceType::builtin("events.k8s.io", "v1", "events", "Event", false),
    ]
}

/// The custom resources groundskeeper works with (scylla-operator's, etcd-operator's and its
/// own).
pub fn groundskeeper_custom_types() -> Vec<ResourceType> {
    vec![
        // SIG etcd's etcd-operator: the same kind as groundskeeper's own, in another group.
        ResourceType::custom("operator.etcd.io", "v1alpha1", "etcdclusters", "EtcdCluster", true, true),
        ResourceType::custom("scylla.scylladb.com", "v1", "scyllaclusters", "ScyllaCluster", true, true),
        ResourceType::custom(
            "scylla.scylladb.com",
            "v1alpha1",
            "scylladbdatacenters",
            "ScyllaDBDatacenter",
            true,
            true,
        ),
        ResourceType::custom("groundskeeper.dev", "v1alpha1", "etcdclusters", "EtcdCluster", true, true),
        ResourceType::custom(
            "groundskeeper.dev",
            "v1alpha1",
            "maintenancetasks",
            "MaintenanceTask",
            true,
            true,
        ),
        ResourceType::custom(
            "groundskeeper.dev",
            "v1alpha1",
            "maintenanceschedules",
            "MaintenanceSchedule",
            true,
            true,
        ),
        ResourceType::custom(
            "groundskeeper.dev",
            "v1alpha1",
            "maintenancesuspensions",
            "MaintenanceSuspension",
            true,
            false,
        ),
    ]
}

/// The registered types, looked up by id.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    types: BTreeMap<ResourceId, ResourceType>,
}

impl Registry {
    pub fn register(&mut self, rt: ResourceType) {
        self.types.insert(rt.id.clone(), rt);
    }

    pub fn get(&self, id: &ResourceId) -> Option<&ResourceType> {
        self.types.get(id)
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }
}

//! What a Restore changes besides its Jobs: the StatefulSet's replicas.

pub(crate) async fn scale(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> crate::runtime::error::Result<()> {
    let patch = serde_json::json!({"spec": {"replicas": replicas}});
    kube::Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(ctx.client.clone(), namespace)
        .patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .map_err(crate::runtime::error::Error::kube(format!(
            "scale StatefulSet {namespace}/{name} to {replicas}"
        )))?;
    tracing::info!(statefulset = %name, replicas, "scaled a StatefulSet for a restore");
    Ok(())
}

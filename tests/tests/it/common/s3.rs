//! What the scenarios with a bucket share: the S3 server's keys as a Secret, as a person would
//! create it for a task's `credentialsSecret`.

use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::s3_server::S3Server;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

/// Creates Secret `namespace/name` with the server's `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY`.
pub fn create_credentials_secret(server: &ApiServer, namespace: &str, name: &str, s3: &S3Server) {
    use base64::Engine;
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "namespace": namespace },
        "data": {
            "AWS_ACCESS_KEY_ID": encode(&s3.access_key),
            "AWS_SECRET_ACCESS_KEY": encode(&s3.secret_key),
        },
    }))
    .expect("a Secret");
    server.create_as(&secret).expect("the credentials Secret");
}

//! The OpenTelemetry resource every exported span carries: which service sent it
//! (`service.name`), which build (`service.version`) and which process of that service
//! (`service.instance.id`), so that two memory nodes or two metadata pods can be told
//! apart in a trace.
//!
//! The instance is, in order: the one the service names itself (a memory node's
//! `--name`), `DMKV_INSTANCE_ID`, `POD_NAME` (set by the Helm chart from the pod's
//! name), or a random 128-bit hexadecimal id drawn once per process. `OTEL_SERVICE_NAME`
//! overrides the service name; attributes in `OTEL_RESOURCE_ATTRIBUTES` are kept unless
//! they name one of these three.

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{IdGenerator as _, RandomIdGenerator};

/// The variable naming this process's instance when the service does not.
pub const INSTANCE_ID_VAR: &str = "DMKV_INSTANCE_ID";
/// The variable a Kubernetes pod's name is passed in.
pub const POD_NAME_VAR: &str = "POD_NAME";
/// The variable overriding the service name.
pub const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// The build's version, reported as `service.version`.
pub const SERVICE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Who exports spans: the three identifying resource attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceIdentity {
    /// `service.name`.
    pub name: String,
    /// `service.version`.
    pub version: String,
    /// `service.instance.id`.
    pub instance_id: String,
}

impl ServiceIdentity {
    /// The identity of `service` in this process, `instance` being the name the service
    /// gives itself if any (see the module documentation), read from the environment.
    pub fn from_env(service: &str, instance: Option<&str>) -> ServiceIdentity {
        ServiceIdentity::resolve(service, instance, |k| std::env::var(k).ok())
    }

    /// Like [`ServiceIdentity::from_env`] with the variables read through `var`.
    pub fn resolve(
        service: &str,
        instance: Option<&str>,
        var: impl Fn(&str) -> Option<String>,
    ) -> ServiceIdentity {
        let non_empty =
            |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let name = non_empty(var(SERVICE_NAME_VAR)).unwrap_or_else(|| service.to_owned());
        let instance_id = non_empty(instance.map(str::to_owned))
            .or_else(|| non_empty(var(INSTANCE_ID_VAR)))
            .or_else(|| non_empty(var(POD_NAME_VAR)))
            .unwrap_or_else(random_instance_id);
        ServiceIdentity {
            name,
            version: SERVICE_VERSION.to_owned(),
            instance_id,
        }
    }

    /// The resource: the SDK's defaults and `OTEL_RESOURCE_ATTRIBUTES`, then these three.
    pub fn resource(&self) -> Resource {
        Resource::builder()
            .with_service_name(self.name.clone())
            .with_attributes([
                KeyValue::new("service.version", self.version.clone()),
                KeyValue::new("service.instance.id", self.instance_id.clone()),
            ])
            .build()
    }
}

/// A random 128-bit id in hexadecimal.
fn random_instance_id() -> String {
    RandomIdGenerator::default().new_trace_id().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::Key;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_service_names_its_instance_first() {
        let vars = [(INSTANCE_ID_VAR, "i-7"), (POD_NAME_VAR, "memnode-0")];
        let id = ServiceIdentity::resolve("memnode", Some("mn-a"), env(&vars));
        assert_eq!(id.instance_id, "mn-a");
        assert_eq!(id.name, "memnode");
        assert_eq!(id.version, SERVICE_VERSION);
        let id = ServiceIdentity::resolve("memnode", Some(" "), env(&vars));
        assert_eq!(id.instance_id, "i-7");
        let id = ServiceIdentity::resolve("memnode", None, env(&vars[1..]));
        assert_eq!(id.instance_id, "memnode-0");
    }

    #[test]
    fn without_a_name_the_instance_is_random() {
        let a = ServiceIdentity::resolve("dmkv", None, env(&[]));
        let b = ServiceIdentity::resolve("dmkv", None, env(&[]));
        assert_eq!(a.instance_id.len(), 32);
        assert!(a.instance_id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.instance_id, b.instance_id);
    }

    #[test]
    fn the_resource_carries_name_version_and_instance() {
        let vars = [(SERVICE_NAME_VAR, "metadata-eu")];
        let r = ServiceIdentity::resolve("metadata", Some("metadata-1"), env(&vars)).resource();
        let get = |k: &'static str| r.get(&Key::from_static_str(k)).map(|v| v.to_string());
        assert_eq!(get("service.name").as_deref(), Some("metadata-eu"));
        assert_eq!(get("service.version").as_deref(), Some(SERVICE_VERSION));
        assert_eq!(get("service.instance.id").as_deref(), Some("metadata-1"));
    }
}

//! What the application lends gateway hook handlers: capabilities such as `agent.run_once`.
//!
//! Gateway hooks are loaded before the gateway that will serve them exists, and this
//! library does not know what an agent turn is (the application does). So the hooks share
//! one late-bound [`ServiceSlot`]: the application implements [`GatewayServices`] and
//! hands it over with [`GatewayHooks::provide`](super::GatewayHooks::provide) once it is
//! running. Native handlers reach the slot through `HostCalls` (the ABI's named
//! capabilities); `handler.py` hooks through their worker's protocol (`{"call": ..}`
//! lines). Until something is provided, or after it is gone, every call fails with a
//! message saying so, and nothing else breaks.
//!
//! The slot holds a [`Weak`] reference: the gateway owns the hooks, so a strong one
//! would keep both alive for ever.

use std::sync::{Arc, RwLock, Weak};

use abi_stable::std_types::{RResult, RStr, RString};
use hermes_hooks_abi::core::HostCalls;
use serde_json::Value;

/// Capabilities a running gateway offers its hook handlers, by name.
///
/// Arguments and answers are JSON objects, as on the ABI's `HostCalls`. An implementation
/// answers an unknown name with an error listing the names it knows.
///
/// ```
/// use hermes_host::gateway::GatewayServices;
/// use serde_json::{Value, json};
///
/// struct Echo;
/// impl GatewayServices for Echo {
///     fn call(&self, capability: &str, args: &Value) -> Result<Value, String> {
///         match capability {
///             "echo" => Ok(args.clone()),
///             other => Err(format!("unknown capability '{other}' (offered: echo)")),
///         }
///     }
/// }
/// assert_eq!(Echo.call("echo", &json!({"a": 1})), Ok(json!({"a": 1})));
/// ```
pub trait GatewayServices: Send + Sync {
    /// Runs `capability` with `args`; the answer or a message saying what went wrong.
    fn call(&self, capability: &str, args: &Value) -> Result<Value, String>;
}

/// The shared, late-bound link from every handler of one [`GatewayHooks`](super::GatewayHooks)
/// to the application's [`GatewayServices`]. Cloning shares it.
#[derive(Clone, Default)]
pub(crate) struct ServiceSlot(Arc<RwLock<Option<Weak<dyn GatewayServices>>>>);

impl std::fmt::Debug for ServiceSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceSlot")
    }
}

impl ServiceSlot {
    /// Points the slot at `services` (replacing what it pointed at).
    pub(crate) fn provide(&self, services: Weak<dyn GatewayServices>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(services);
    }

    /// Calls `capability` on what the slot points at.
    pub(crate) fn call(&self, capability: &str, args: &Value) -> Result<Value, String> {
        let services = self
            .0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(Weak::upgrade);
        match services {
            Some(services) => services.call(capability, args),
            None => Err(format!(
                "{capability}: no running gateway serves this hook's calls (it was loaded outside `hermes gateway run`, or the gateway has stopped)"
            )),
        }
    }
}

impl GatewayServices for ServiceSlot {
    fn call(&self, capability: &str, args: &Value) -> Result<Value, String> {
        ServiceSlot::call(self, capability, args)
    }
}

/// Offers a [`GatewayServices`] to native callbacks as the ABI's `HostCalls`: the
/// arguments must be a JSON object (else an error naming the capability), and the answer
/// or the error crosses back as text. Every host-side capability set goes through here, so
/// they all check arguments alike.
///
/// ```
/// use hermes_host::gateway::{GatewayServices, HostCallsOf};
/// use hermes_hooks_abi::core::HostCalls;
/// use hermes_hooks_abi::abi_stable::std_types::RStr;
/// use serde_json::Value;
///
/// struct Echo;
/// impl GatewayServices for Echo {
///     fn call(&self, _capability: &str, args: &Value) -> Result<Value, String> {
///         Ok(args.clone())
///     }
/// }
/// let host = HostCallsOf(&Echo);
/// let answer = host.call(RStr::from("echo"), RStr::from(r#"{"a":1}"#)).into_result();
/// assert_eq!(answer.map(|a| a.into_string()), Ok(r#"{"a":1}"#.to_string()));
/// assert!(host.call(RStr::from("echo"), RStr::from("[1]")).into_result().is_err());
/// ```
pub struct HostCallsOf<'a>(pub &'a dyn GatewayServices);

impl HostCalls for HostCallsOf<'_> {
    fn call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString> {
        let args: Value = match serde_json::from_str(args_json.as_str()) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return RResult::RErr(
                    format!("{capability}: the arguments must be a JSON object").into(),
                );
            }
        };
        match self.0.call(capability.as_str(), &args) {
            Ok(answer) => RResult::ROk(answer.to_string().into()),
            Err(message) => RResult::RErr(message.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Named;
    impl GatewayServices for Named {
        fn call(&self, capability: &str, _args: &Value) -> Result<Value, String> {
            Ok(json!({ "called": capability }))
        }
    }

    #[test]
    fn an_empty_or_dropped_slot_answers_with_an_error_and_a_provided_one_calls_through() {
        let slot = ServiceSlot::default();
        let before = slot.call("agent.run_once", &json!({}));
        assert!(
            before
                .as_ref()
                .is_err_and(|e| e.contains("no running gateway")),
            "{before:?}"
        );
        let services: Arc<dyn GatewayServices> = Arc::new(Named);
        slot.provide(Arc::downgrade(&services));
        assert_eq!(
            slot.clone().call("agent.run_once", &json!({})),
            Ok(json!({"called": "agent.run_once"}))
        );
        drop(services);
        assert!(slot.call("agent.run_once", &json!({})).is_err());
    }

    #[test]
    fn host_calls_reject_arguments_that_are_not_an_object() {
        let slot = ServiceSlot::default();
        let answer = HostCallsOf(&slot).call(RStr::from("x"), RStr::from("[1]"));
        assert!(
            answer
                .into_result()
                .is_err_and(|e| e.contains("JSON object"))
        );
    }
}

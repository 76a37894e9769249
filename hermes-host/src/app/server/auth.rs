//! Who may talk to the agent: `gateway.allowed_users` in `config.yaml`.
//!
//! ```yaml
//! gateway:
//!   allowed_users: [alice, "12345"]   # absent: everyone; []: no one
//! ```
//!
//! Ids are compared as text, so a numeric id may be written with or without quotes.

use std::collections::HashSet;

use yaml_serde::Value;

use hermes_host::config::{Config, yaml_type_name};

/// The users allowed to use the gateway.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedUsers {
    users: Option<HashSet<String>>,
}

impl AllowedUsers {
    /// Everyone is allowed.
    pub fn everyone() -> AllowedUsers {
        AllowedUsers { users: None }
    }

    /// Only `users` are allowed.
    pub fn only(users: impl IntoIterator<Item = String>) -> AllowedUsers {
        AllowedUsers {
            users: Some(users.into_iter().collect()),
        }
    }

    /// Reads `gateway.allowed_users` from `config`.
    ///
    /// # Errors
    ///
    /// When the key is there but is not a list of ids (then nobody is allowed, so a typo
    /// never opens the gateway to everyone); the message names the key and the fix.
    pub fn from_config(config: &Config) -> Result<AllowedUsers, (AllowedUsers, String)> {
        let Some(value) = &config.gateway.allowed_users else {
            return Ok(AllowedUsers::everyone());
        };
        let refuse = |what: &str| {
            let message = format!(
                "config.yaml: gateway.allowed_users must be a list of user ids, not {what}; nobody is allowed until it is fixed"
            );
            Err((AllowedUsers::only([]), message))
        };
        let Value::Sequence(items) = value else {
            return refuse(yaml_type_name(value));
        };
        let mut users = HashSet::new();
        for item in items {
            match item {
                Value::String(s) => users.insert(s.clone()),
                Value::Number(n) => users.insert(n.to_string()),
                other => return refuse(&format!("a list holding {}", yaml_type_name(other))),
            };
        }
        Ok(AllowedUsers { users: Some(users) })
    }

    /// Whether `user_id` may use the gateway.
    pub fn allows(&self, user_id: &str) -> bool {
        self.users
            .as_ref()
            .is_none_or(|users| users.contains(user_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_list_allows_no_one_and_a_bad_value_refuses_everyone() {
        let config = Config::parse("gateway:\n  allowed_users: []\n").unwrap();
        assert!(!AllowedUsers::from_config(&config).unwrap().allows("alice"));
        let config = Config::parse("gateway:\n  allowed_users: alice\n").unwrap();
        let (fallback, message) = AllowedUsers::from_config(&config).unwrap_err();
        assert!(!fallback.allows("alice"));
        assert!(
            message.contains("gateway.allowed_users must be a list"),
            "{message}"
        );
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn from_config_works_as_documented() {
        use crate::app::server::AllowedUsers;
        use hermes_host::config::Config;
        let config = Config::parse("gateway:\n  allowed_users: [alice, 42]\n").unwrap();
        let allowed = AllowedUsers::from_config(&config).unwrap();
        assert!(allowed.allows("alice") && allowed.allows("42") && !allowed.allows("mallory"));
        assert!(
            AllowedUsers::from_config(&Config::default())
                .unwrap()
                .allows("anyone")
        );
    }
}

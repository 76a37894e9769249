//! The application on top of the library: what the `hermes` binary runs besides its command
//! line. It uses the library only through its public API (the `Hooks` facade, the registry's
//! typed methods, the gateway hooks), exactly as an embedder would, and nothing in the
//! library depends on it.
//!
//! - [`agent`] is the reference agent loop: a scripted model, real tools, approvals, and
//!   every hook fired at its documented point.
//! - [`server`] is the local message gateway: the agent behind TCP and stdin adapters, with
//!   sessions per chat, `pre_gateway_dispatch`, gateway events and transcripts.
//! - [`mod@bench`] measures what the installed hooks cost (`hermes bench`).
//! - [`logfile`] writes the log files `hermes logs` reads.

pub mod agent;
pub mod bench;
#[cfg(feature = "nats")]
pub mod fleet;
pub mod logfile;
pub mod server;
pub mod shadow;

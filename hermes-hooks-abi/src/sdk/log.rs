//! The bridge from `tracing` inside a plugin to the host's log.
//!
//! A cdylib carries its own copy of `tracing` with its own global dispatcher, so without a
//! bridge a plugin's `tracing::info!` goes nowhere. `install` sets that copy's global default
//! to a subscriber that filters by the host's level *before* formatting (a disabled
//! `debug!` costs one comparison) and hands the formatted record to the host's logger.

use std::fmt::Write as _;

use abi_stable::std_types::RStr;
use tracing_core::{
    Event, Interest, Level, LevelFilter, Metadata, Subscriber,
    field::{Field, Visit},
    span,
};

use crate::core::{HostLoggerBox, level};

/// Installs the bridge as this library's global `tracing` subscriber, once.
pub(super) fn install(logger: HostLoggerBox, plugin_name: String) {
    let max = logger.max_level();
    let bridge = Bridge { logger, max };
    // A second install (a library registered twice) keeps the first bridge, which is fine:
    // both point at the same host.
    let _ = tracing::subscriber::set_global_default(bridge);
    let name = plugin_name;
    // Without this, a caught panic would also print `thread panicked at` on stderr. The
    // host logs the panic message itself; the location goes to its debug log.
    std::panic::set_hook(Box::new(move |info| {
        tracing::debug!(
            "plugin '{name}' panicked at {}",
            info.location().map_or_else(String::new, |l| l.to_string())
        );
    }));
}

struct Bridge {
    logger: HostLoggerBox,
    max: u8,
}

fn level_number(level: &Level) -> u8 {
    match *level {
        Level::ERROR => level::ERROR,
        Level::WARN => level::WARN,
        Level::INFO => level::INFO,
        Level::DEBUG => level::DEBUG,
        Level::TRACE => level::TRACE,
    }
}

impl Subscriber for Bridge {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        level_number(meta.level()) <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(match self.max {
            level::OFF => LevelFilter::OFF,
            level::ERROR => LevelFilter::ERROR,
            level::WARN => LevelFilter::WARN,
            level::INFO => LevelFilter::INFO,
            level::DEBUG => LevelFilter::DEBUG,
            _ => LevelFilter::TRACE,
        })
    }

    fn new_span(&self, _span: &span::Attributes<'_>) -> span::Id {
        // Spans are not forwarded; events inside them still are.
        span::Id::from_u64(1)
    }

    fn record(&self, _span: &span::Id, _values: &span::Record<'_>) {}

    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let mut text = Message::default();
        event.record(&mut text);
        self.logger.log(
            level_number(meta.level()),
            RStr::from(meta.target()),
            RStr::from(text.0.as_str()),
        );
    }

    fn enter(&self, _span: &span::Id) {}

    fn exit(&self, _span: &span::Id) {}
}

/// `message` first, then `key=value` for every other field, as tracing's fmt layer prints.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.push_message(format_args!("{value}"));
        } else {
            self.push_field(field.name(), format_args!("{value:?}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.push_message(format_args!("{value:?}"));
        } else {
            self.push_field(field.name(), format_args!("{value:?}"));
        }
    }
}

impl Message {
    fn push_message(&mut self, args: std::fmt::Arguments<'_>) {
        let rest = std::mem::take(&mut self.0);
        let _ = self.0.write_fmt(args);
        if !rest.is_empty() {
            self.0.push(' ');
            self.0.push_str(&rest);
        }
    }

    fn push_field(&mut self, name: &str, args: std::fmt::Arguments<'_>) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        let _ = write!(self.0, "{name}=");
        let _ = self.0.write_fmt(args);
    }
}

//! What several commands read the same way: a JSON payload given inline or in a file, and
//! where the trace goes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::app::agent::{TraceFormat, Tracer};
use anyhow::Context;

/// The payload text of `--payload JSON` or `--payload-file FILE` (`{}` when neither).
pub fn payload_text(inline: Option<String>, file: Option<PathBuf>) -> anyhow::Result<String> {
    Ok(match (inline, file) {
        (Some(text), _) => text,
        (None, Some(file)) => std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read the payload file {}", file.display()))?,
        (None, None) => "{}".to_string(),
    })
}

/// The tracer of `--trace FORMAT [--trace-file FILE]`: to the file, else to stderr.
pub fn tracer(format: &str, file: Option<&Path>) -> anyhow::Result<Arc<Tracer>> {
    let format: TraceFormat = format.parse().map_err(anyhow::Error::msg)?;
    let out: Box<dyn Write + Send> = match file {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => Box::new(std::io::stderr()),
    };
    Ok(Arc::new(Tracer::new(format, out)))
}

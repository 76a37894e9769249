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
        // A JSON trace holds every payload (commands, file contents): private to the user,
        // as the transcripts are, even when the file was there before.
        Some(path) => Box::new({
            use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("cannot make {} private", path.display()))?;
            file
        }),
        None => Box::new(std::io::stderr()),
    };
    Ok(Arc::new(Tracer::new(format, out)))
}

//! The example plugins in `plugins/`, installed together and doing their jobs.

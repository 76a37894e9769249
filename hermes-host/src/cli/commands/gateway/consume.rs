//! `hermes gateway consume`: this home's gateway hooks on the events of the fleet's stream
//! (see `app::fleet::consume`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use hermes_host::gateway::GatewayLog;

use crate::app::fleet::NatsSettings;
use crate::app::fleet::consume::{ConsumeCounters, ConsumeOptions};
use crate::cli::ExitStatus;
use crate::cli::args::GatewayConsumeArgs;
use crate::cli::settings::Settings;

pub fn run(args: GatewayConsumeArgs, settings: &Settings) -> anyhow::Result<ExitStatus> {
    let (config, problem) = settings.home.load_config();
    if let Some(problem) = problem {
        eprintln!("hermes: {problem}");
    }
    let from_config = NatsSettings::from_config(&config.gateway).map_err(anyhow::Error::msg)?;
    let nats = match (&args.nats, from_config) {
        (Some(url), Some(config)) => NatsSettings {
            url: url.clone(),
            ..config
        },
        (Some(url), None) => NatsSettings::for_url(url),
        (None, Some(config)) => config,
        (None, None) => bail!(
            "no broker: pass --nats URL, or set gateway.events.nats.url in {}",
            settings.home.config_path().display()
        ),
    };
    if !(args.handler_timeout.is_finite() && args.handler_timeout > 0.0) {
        bail!("--handler-timeout must be a number of seconds above 0");
    }
    if args.max_deliver < 1 {
        bail!("--max-deliver must be 1 or more");
    }
    let handler_timeout = Duration::from_secs_f64(args.handler_timeout);
    let ack_wait = match args.ack_wait {
        Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
        Some(_) => bail!("--ack-wait must be a number of seconds above 0"),
        None => handler_timeout + Duration::from_secs(10),
    };
    let options = ConsumeOptions {
        durable: args.durable.clone(),
        handler_timeout,
        ack_wait,
        max_deliver: args.max_deliver,
        concurrency: args.concurrency.max(1),
    };
    // Its log: stderr and logs/consume.log (or --log-file).
    let file = match crate::app::logfile::global() {
        Some(file) => Some(file),
        None => {
            let path = settings.home.root().join("logs").join("consume.log");
            let file = crate::app::logfile::LogFile::open(&path, settings.log_format).ok();
            if let Some(file) = &file {
                crate::app::logfile::set_global(file.clone());
            }
            file
        }
    };
    let log: Arc<dyn GatewayLog> = Arc::new(move |line: &str| {
        eprintln!("{line}");
        if let Some(file) = &file {
            file.line(line);
        }
    });
    let hooks = crate::cli::load::load_gateway(settings, log.clone())?;
    let (_, gateway, _, _) = hooks.into_parts();
    let gateway = Arc::new(gateway.context("the gateway hooks did not load")?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("consume")
        .enable_all()
        .build()
        .context("cannot start the consumer's runtime")?;
    let counters = Arc::new(ConsumeCounters::default());
    let result = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = interrupt.recv() => {},
                _ = terminate.recv() => {},
            }
        };
        std::io::Result::Ok(
            crate::app::fleet::consume::run(
                &nats,
                &options,
                gateway.clone(),
                log.clone(),
                counters.clone(),
                stop,
            )
            .await,
        )
    });
    let report = gateway.shutdown(Duration::from_secs(10));
    let _ = report;
    log.line(&format!(
        "gateway consume: stopped; {} event(s) handled, {} failure(s), {} redelivered, {} terminated",
        counters.handled.load(Ordering::Relaxed),
        counters.failed.load(Ordering::Relaxed),
        counters.redelivered.load(Ordering::Relaxed),
        counters.terminated.load(Ordering::Relaxed)
    ));
    match result {
        Ok(Ok(())) => Ok(ExitStatus::Success),
        Ok(Err(why)) => bail!("{why}"),
        Err(e) => bail!("cannot listen for SIGINT and SIGTERM: {e}"),
    }
}

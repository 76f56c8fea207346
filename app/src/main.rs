//! `nbody-interop` binary: a thin `main` over [`nbody_app`].

use std::process::ExitCode;

use nbody_app::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse_command_line();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match &cli.command {
        None => nbody_app::demo::run(&cli.demo),
        Some(Command::Info(a)) => nbody_app::info::run(a),
        Some(Command::Bench(a)) => nbody_app::bench::run(a),
        Some(Command::Lab(a)) => nbody_app::teach::command::run(&nbody_app::teach::command::LabOptions {
            name: a.name.clone(),
            json: a.json,
            quiz: a.quiz,
            replay: a.replay.clone(),
            child: a.child,
        }),
        Some(Command::Switch(a)) => nbody_app::probe::switch::run(a),
        Some(Command::Scale(a)) => nbody_app::probe::scale::run(a),
        Some(Command::Accuracy(a)) => nbody_app::probe::accuracy::run(a),
        Some(Command::Doctor(a)) => nbody_app::doctor::run(a.json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The report is printed; its last line says why the status is not 0.
        Err(e) if e.is::<nbody_app::doctor::NoInterop>() => ExitCode::from(nbody_app::doctor::EXIT_NO_INTEROP),
        Err(e) if is_interrupted(&e) => {
            eprintln!("{e:#}");
            ExitCode::from(nbody_app::stop::exit_code())
        }
        // The reader of stdout went away (`lab … | head`): end quietly with the status of a
        // process killed by SIGPIPE (128 + 13), as a C program's would.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(141),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// True when `e` comes from writing to a closed pipe.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// True when `e` says the run was interrupted (after writing its outputs).
fn is_interrupted(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<nbody_app::stop::Interrupted>() || c.is::<nbody_app::bench::Interrupted>() || c.is::<nbody_app::probe::switch::SwitchInterrupted>()
    })
}

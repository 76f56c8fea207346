//! The text report: one line per check (name, verdict, evidence), its remedy on the next line
//! where there is one, then the routes.

use std::fmt::Write as _;

use super::{Report, EXIT_INTEROP, EXIT_NO_INTEROP};

/// The report as text.
pub(super) fn text(r: &Report) -> String {
    let mut s = String::from("nbody-interop doctor: each check, in the order a frame needs them\n\n");
    let width = r.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in &r.checks {
        let _ = writeln!(s, "{:<width$}  {:<14}  {}", c.name, c.verdict.word(), c.evidence);
        if !c.remedy.is_empty() {
            let _ = writeln!(s, "{:<width$}  {:<14}  remedy: {}", "", "", c.remedy);
        }
    }
    let _ = writeln!(s, "\nroutes with the demo's defaults (--present auto, --backend auto, --interop map):");
    let rt = &r.routes;
    for (name, route) in [("window", &rt.window), ("backend", &rt.backend), ("storage", &rt.storage), ("--headless", &rt.headless)] {
        let _ = writeln!(s, "  {name:<11} {:<6}  {}", route.route, route.why);
    }
    let verdict = if r.exit == EXIT_INTEROP {
        format!("the demo runs with CUDA interop (exit {EXIT_INTEROP})")
    } else {
        format!("the demo does not run with CUDA interop here (exit {EXIT_NO_INTEROP})")
    };
    let _ = writeln!(s, "\n{verdict}");
    s
}

//! Small egui widgets the overlay is built from: a combo box of named values, the interop
//! settings box, the solver row, and drag values that keep the value in force.

use egui::RichText;

use super::action::Action;
use crate::backend::InteropSettings;
use crate::cuda::settings::{InteropMode, ResourceFlags, StreamKind};
use sim::tree::Solver;

pub(super) fn combo<T: PartialEq + Copy>(ui: &mut egui::Ui, label: &str, value: &mut T, options: &[(T, &str)]) {
    let current = options.iter().find(|(v, _)| v == value).map_or("?", |(_, n)| n);
    egui::ComboBox::new(label, label).selected_text(current).show_ui(ui, |ui| {
        for (v, name) in options {
            ui.selectable_value(value, *v, *name);
        }
    });
}

pub(super) fn settings_ui(ui: &mut egui::Ui, settings: Option<InteropSettings>, open: bool, actions: &mut Vec<Action>) {
    egui::CollapsingHeader::new("Interop settings").default_open(open).show(ui, |ui| {
        let Some(old) = settings else {
            ui.label("(CPU backend: no interop settings)");
            return;
        };
        let mut s = old;
        let flags = [(ResourceFlags::None, "none"), (ResourceFlags::ReadOnly, "read-only"), (ResourceFlags::WriteDiscard, "write-discard")];
        combo(ui, "interop mode", &mut s.interop, &[(InteropMode::Map, "map"), (InteropMode::Copy, "copy"), (InteropMode::External, "external")]);
        // Registration and mapping exist only in map mode: elsewhere the flags are shown disabled.
        let maps = s.interop == InteropMode::Map;
        ui.add_enabled_ui(maps, |ui| {
            // Register flags that promise "CUDA will not write" (read-only) or "will not read"
            // (write-discard) cannot hold for ping-pong buffers: only none is offered; the roles
            // go into the per-frame map flags.
            combo(ui, "register flags", &mut s.register_flags, &flags[..1]);
            combo(ui, "map flags", &mut s.map_flags, &flags);
        });
        if !maps {
            ui.label(RichText::new("(register and map flags apply to --interop map only: this mode registers and maps nothing)").small());
        }
        combo(
            ui,
            "stream",
            &mut s.stream,
            &[(StreamKind::Legacy, "legacy"), (StreamKind::PerThread, "per-thread"), (StreamKind::NonBlocking, "non-blocking")],
        );
        ui.horizontal(|ui| {
            ui.label("priority");
            ui.add(keep(egui::DragValue::new(&mut s.stream_priority).range(-1000..=1000)));
        });
        combo(ui, "block size", &mut s.block_size, &[(0, "auto"), (64, "64"), (128, "128"), (256, "256"), (512, "512"), (1024, "1024")]);
        if s != old {
            actions.push(Action::ApplySettings(s));
        }
    });
}

/// A drag value that shows the value in force as it is: the range bounds only what a drag or an
/// edit makes, never a value the user gave on the command line (HOUSE-STYLE 16), and no decimals
/// are rounded away.
pub(super) fn keep(d: egui::DragValue<'_>) -> egui::DragValue<'_> {
    d.clamp_existing_to_range(false)
}

/// The solver row: direct, tree or auto, and θ (`theta`, kept while direct is picked); a change
/// pushes [`Action::SetSolver`].
pub(super) fn solver_ui(ui: &mut egui::Ui, solver: &mut Solver, theta: &mut f32, actions: &mut Vec<Action>) {
    let mut name = match *solver {
        Solver::Direct => "direct",
        Solver::Tree { theta: t } | Solver::Auto { theta: t } => {
            *theta = t;
            if matches!(solver, Solver::Tree { .. }) {
                "tree"
            } else {
                "auto"
            }
        }
    };
    ui.horizontal(|ui| {
        ui.label("solver");
        for n in ["direct", "tree", "auto"] {
            ui.radio_value(&mut name, n, n);
        }
        ui.add_enabled(name != "direct", keep(egui::DragValue::new(theta).speed(0.01).range(0.0..=2.0).prefix("θ ")))
            .on_hover_text("opening angle: a cell of side l at distance d is opened when l / d ≥ θ (--theta)");
    });
    let picked = match name {
        "tree" => Solver::Tree { theta: *theta },
        "auto" => Solver::Auto { theta: *theta },
        _ => Solver::Direct,
    };
    if picked != *solver {
        *solver = picked;
        actions.push(Action::SetSolver(picked));
    }
}

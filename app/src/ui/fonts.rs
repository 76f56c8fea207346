//! The overlay's fonts: egui's bundled ones, or system fonts where egui was built without them.

/// System fonts tried, in order, when egui was built without its `default_fonts` feature:
/// (proportional, monospace).
const SYSTEM_FONTS: [(&str, &str); 4] = [
    ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"),
    ("/usr/share/fonts/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSansMono.ttf"),
    ("/usr/share/fonts/TTF/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSansMono.ttf"),
    ("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf", "/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf"),
];

/// Make sure egui has fonts: its bundled ones when egui's `default_fonts` feature is on, else a
/// system TTF font (DejaVu or Liberation). Without either the overlay draws no text (logged).
pub fn install_fonts(ctx: &egui::Context) {
    if !egui::FontDefinitions::default().font_data.is_empty() {
        return;
    }
    for (prop, mono) in SYSTEM_FONTS {
        let Ok(p) = std::fs::read(prop) else { continue };
        let m = std::fs::read(mono).ok();
        let mut defs = egui::FontDefinitions::empty();
        defs.font_data.insert("system-prop".into(), std::sync::Arc::new(egui::FontData::from_owned(p)));
        let mut mono_list = Vec::new();
        if let Some(m) = m {
            defs.font_data.insert("system-mono".into(), std::sync::Arc::new(egui::FontData::from_owned(m)));
            mono_list.push("system-mono".to_owned());
        }
        mono_list.push("system-prop".to_owned());
        defs.families.insert(egui::FontFamily::Proportional, vec!["system-prop".to_owned()]);
        defs.families.insert(egui::FontFamily::Monospace, mono_list);
        ctx.set_fonts(defs);
        tracing::debug!(font = prop, "overlay uses a system font (egui built without default_fonts)");
        return;
    }
    tracing::warn!("no font for the overlay: egui lacks its default_fonts feature and no DejaVu/Liberation TTF was found");
}

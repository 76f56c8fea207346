//! Orbit camera: left drag orbits, the wheel zooms, right drag pans.

use glam::{Mat4, Vec3};

/// A camera that looks at `target` from `distance` away, at angles `yaw` and `pitch`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrbitCamera {
    /// Point looked at (world units).
    pub target: Vec3,
    /// Distance from the target (world units, > 0).
    pub distance: f32,
    /// Rotation about the world y axis (radians).
    pub yaw: f32,
    /// Elevation above the xz plane (radians, within ±89°).
    pub pitch: f32,
    /// Vertical field of view (radians).
    pub fov_y: f32,
}

const PITCH_LIMIT: f32 = 89.0 * std::f32::consts::PI / 180.0;

impl OrbitCamera {
    /// A camera that frames a cloud of bodies of radius `radius` (world units) around `center`.
    pub fn framing(center: Vec3, radius: f32) -> Self {
        let fov_y = 45f32.to_radians();
        let radius = if radius.is_finite() && radius > 0.0 { radius } else { 1.0 };
        Self { target: center, distance: radius / (fov_y * 0.5).tan() * 1.1, yaw: 0.6, pitch: 0.45, fov_y }
    }

    /// Camera position in world space.
    pub fn eye(&self) -> Vec3 {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.pitch.sin_cos();
        self.target + self.distance * Vec3::new(cp * sy, sp, cp * cy)
    }

    /// View matrix (right-handed, y up).
    pub fn view(&self) -> Mat4 {
        glam::camera::rh::view::look_at_mat4(self.eye(), self.target, Vec3::Y)
    }

    /// Projection matrix for `aspect` = width / height (GL clip space, z in −1..1).
    pub fn projection(&self, aspect: f32) -> Mat4 {
        let aspect = if aspect.is_finite() && aspect > 0.0 { aspect } else { 1.0 };
        let near = (self.distance * 1e-3).max(1e-5);
        let far = self.distance * 1e3 + 1.0;
        glam::camera::rh::proj::opengl::perspective(self.fov_y, aspect, near, far)
    }

    /// Projection × view.
    pub fn view_proj(&self, aspect: f32) -> Mat4 {
        self.projection(aspect) * self.view()
    }

    /// Pixels per world unit at view distance 1, for a viewport `height_px` tall.
    pub fn px_per_unit(&self, height_px: f32) -> f32 {
        height_px * 0.5 / (self.fov_y * 0.5).tan()
    }

    /// Orbit by a mouse drag of `dx`, `dy` logical pixels.
    pub fn orbit(&mut self, dx: f32, dy: f32) {
        self.yaw -= dx * 0.008;
        self.pitch = (self.pitch + dy * 0.008).clamp(-PITCH_LIMIT, PITCH_LIMIT);
    }

    /// Zoom by `steps` wheel notches (positive: closer).
    pub fn zoom(&mut self, steps: f32) {
        self.distance = (self.distance * 0.9f32.powf(steps)).clamp(1e-4, 1e7);
    }

    /// Pan by a mouse drag of `dx`, `dy` pixels in a viewport `height_px` tall (same pixel kind).
    pub fn pan(&mut self, dx: f32, dy: f32, height_px: f32) {
        let world_per_px = 2.0 * self.distance * (self.fov_y * 0.5).tan() / height_px.max(1.0);
        let view = self.view();
        let right = view.row(0).truncate();
        let up = view.row(1).truncate();
        self.target += (-dx * right + dy * up) * world_per_px;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_projects_to_the_centre() {
        let cam = OrbitCamera::framing(Vec3::new(1.0, 2.0, 3.0), 5.0);
        let clip = cam.view_proj(1.6) * Vec3::new(1.0, 2.0, 3.0).extend(1.0);
        assert!((clip.x / clip.w).abs() < 1e-5 && (clip.y / clip.w).abs() < 1e-5);
    }

    #[test]
    fn pitch_is_clamped_and_zoom_stays_positive() {
        let mut cam = OrbitCamera::framing(Vec3::ZERO, 1.0);
        cam.orbit(0.0, 1e6);
        assert!(cam.pitch <= PITCH_LIMIT);
        cam.zoom(1e4);
        assert!(cam.distance > 0.0);
    }
}

// Body point sprites. The `#version` line (330 core or 300 es) is prepended at load time.
//
// a_pos_mass: the newest positions (front VBO), float4 x, y, z, mass.
// a_prev:     the other VBO, holding the positions before the last simulate call; the
//             displacement between the two, divided by the time it spans, is the speed that
//             picks the colour.

layout(location = 0) in vec4 a_pos_mass;
layout(location = 1) in vec4 a_prev;

uniform mat4 u_view_proj;
// Pixels per world unit at clip-space w = 1 (viewport height * proj[1][1] / 2).
uniform float u_px_per_unit;
// Radius of a body's sprite in world units.
uniform float u_world_size;
// Smallest and largest sprite diameter in pixels (the smallest scales with DPI).
uniform float u_min_px;
uniform float u_max_px;
// 1 / (time spanned by the two buffers * reference speed): maps displacement to 0..1.
uniform float u_speed_scale;
// Brightness of one sprite before additive blending.
uniform float u_intensity;

out vec3 v_color;
out float v_intensity;

vec3 palette(float s) {
    // Slow: deep blue, medium: white-ish, fast: orange-red.
    vec3 slow = vec3(0.25, 0.45, 1.0);
    vec3 mid = vec3(0.95, 0.95, 1.0);
    vec3 fast = vec3(1.0, 0.45, 0.15);
    return s < 0.5 ? mix(slow, mid, s * 2.0) : mix(mid, fast, s * 2.0 - 1.0);
}

void main() {
    vec4 clip = u_view_proj * vec4(a_pos_mass.xyz, 1.0);
    gl_Position = clip;
    float w = max(clip.w, 1e-4);
    float size = 2.0 * u_world_size * u_px_per_unit / w;
    float clamped = clamp(size, u_min_px, u_max_px);
    gl_PointSize = clamped;
    float speed = length(a_pos_mass.xyz - a_prev.xyz) * u_speed_scale;
    v_color = palette(clamp(speed, 0.0, 1.0));
    // A sprite drawn larger than its true size spreads the same light over more pixels.
    v_intensity = u_intensity * clamp((size * size) / (clamped * clamped), 0.4, 1.0);
}

// Tone mapping of the bodies' light, summed additively in a half-float buffer: the brightest
// channel L maps to 1 - exp(-L) and the colour is scaled with it, so a dense core keeps the
// colour of its bodies (speed) instead of clipping to white. The background is added after.
// The `#version` line (and, for GLSL ES, a default precision) is prepended at load time.

in vec2 v_uv;
uniform sampler2D u_light;
uniform vec3 u_background;
out vec4 o_color;

void main() {
    // Half floats saturate at 65504 (then inf): clamp before the map, whose ratio is then finite.
    vec3 c = min(texture(u_light, v_uv).rgb, vec3(6.0e4));
    float l = max(max(c.r, c.g), c.b);
    vec3 mapped = l > 0.0 ? c * ((1.0 - exp(-l)) / l) : vec3(0.0);
    o_color = vec4(u_background + mapped * (1.0 - u_background), 1.0);
}

// Body point sprites: a soft round spot, blended additively. The `#version` line (and, for
// GLSL ES, a default precision) is prepended at load time.

in vec3 v_color;
in float v_intensity;

out vec4 o_color;

void main() {
    vec2 d = gl_PointCoord * 2.0 - 1.0;
    float r2 = dot(d, d);
    if (r2 > 1.0) {
        discard;
    }
    float a = exp(-4.0 * r2) * v_intensity;
    o_color = vec4(v_color * a, a);
}

// The density view's full-screen pass: the RGBA8 image that CUDA tone-mapped, drawn as it is
// (bilinear where the window is scaled). The `#version` line (and, for GLSL ES, a default
// precision) is prepended at load time.

in vec2 v_uv;
uniform sampler2D u_image;
out vec4 o_color;

void main() {
    o_color = vec4(texture(u_image, v_uv).rgb, 1.0);
}

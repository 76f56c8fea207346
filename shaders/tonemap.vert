// Full-screen triangle for the tone-mapping pass (no vertex buffer: positions from gl_VertexID).
// The `#version` line is prepended at load time.

out vec2 v_uv;

void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    v_uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}

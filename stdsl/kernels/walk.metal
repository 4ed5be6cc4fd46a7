// Walk kernel (Metal body for mx.fast.metal_kernel): thread (t, b) walks token t's bytes from row b's state.
// Inputs: table (flat Q*C class table, -1 dead), byte_class (256: the class of each byte), states (B), data (packed token bytes), offsets (V+1),
// kind (V: 0 walk, 1 eos, 2 never), accepting (Q), cover (Q: minimum token byte length), sizes ([V, B, C]).
// Outputs: next_state (B*V, -1 dead), mask (B*V).
uint t = thread_position_in_grid.x;
uint b = thread_position_in_grid.y;
int vocab_size = sizes[0];
int rows = sizes[1];
int classes = sizes[2];
if ((int)t >= vocab_size || (int)b >= rows) {
    return;
}
int q = states[b];
int s = -1;
bool ok = false;
if (q >= 0) {
    uint8_t k = kind[t];
    if (k == 0) {
        int start = offsets[t];
        int end = offsets[t + 1];
        s = q;
        for (int i = start; i < end && s >= 0; ++i) {
            s = (int)table[s * classes + byte_class[data[i]]];
        }
        ok = s >= 0 && (end - start) >= cover[q];
    } else if (k == 1) {
        ok = accepting[q];
    }
}
ulong o = (ulong)b * (ulong)vocab_size + (ulong)t;
next_state[o] = s;
mask[o] = ok;

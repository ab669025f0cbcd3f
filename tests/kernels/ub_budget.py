"""The UB arithmetic of ``recurrent_gated_delta_rule`` (0.23.0 + the L2-norm patch), host and kernel side.

``host_tiling`` ports ``op_host/recurrent_gated_delta_rule_tiling.cpp`` (CalcFixedUbBytes,
CalcWorkingUbBytes, CalcVStepCoeff, EvaluateBufferProfile, IsBetterProfile, FinalizeVStepFromUb);
``kernel_ub_bytes`` adds up what ``op_kernel/recurrent_gated_delta_rule.h`` InitLocalBuffers
allocates (each buffer rounded up to 32 bytes). Together they check that the patch's extra buffer
is budgeted, i.e. that what the kernel allocates fits in UB for the tiling the host picks.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_MTP = 16
UB_BYTES = 196608  # assumed AIV unified buffer of the 910B/910C (192 KiB); CANN reports it at run time
PROFILES = ((1, 1), (1, 2), (2, 2), (3, 3))  # (stateOutBufferNum, attnOutBufferNum) candidates


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@dataclass(frozen=True)
class Tiling:
    state_out_buffers: int
    attn_out_buffers: int
    v_step: int
    repeat: int
    fixed_bytes: int
    ub_rest_bytes: int


def host_tiling(nv: int, dv: int, dk: int, state_bytes: int, use_l2norm: bool, has_gama: bool = True,
                has_gamak: bool = False, ub: int = UB_BYTES) -> Tiling | None:
    """The tiling the host computes, or None where it fails ("vStep should be bigger than 8")."""
    a_nv, a_dv, a_dk = _align(nv, 16), _align(dv, 16), _align(dk, 16)
    fixed = MAX_MTP * (4 * a_dk + 2 * a_dv) + 128 + MAX_MTP * 2 * a_nv
    fixed += MAX_MTP * 4 * a_dk if has_gamak else 0
    fixed += MAX_MTP * 4 * a_nv if has_gama else 0
    fixed += MAX_MTP * 4 * a_dk + MAX_MTP * 4 if use_l2norm else 0
    working = fixed + MAX_MTP * (8 * a_dk + 4 * a_dv + 4 * a_nv)
    best = None
    for s, a in PROFILES:
        coeff = (state_bytes + state_bytes * s) * a_dk + 4 * a + 8 * a_dk + 8
        v_step = (ub - working) // coeff // 8 * 8
        if v_step < 8:
            continue
        repeat = _cdiv(dv, v_step)
        v_step = _align(_cdiv(dv, repeat), 8)
        key = (repeat, -(s + a), -v_step)  # IsBetterProfile: fewer repeats, deeper buffers, bigger vStep
        if best is None or key < best[0]:
            best = (key, s, a, v_step, repeat)
    if best is None:
        return None
    _, s, a, v_step, repeat = best
    rest = ub - fixed - ((state_bytes + state_bytes * s) * a_dk + 4 * a) * v_step
    return Tiling(s, a, v_step, repeat, fixed, rest)


def kernel_ub_bytes(nv: int, dv: int, dk: int, state_bytes: int, use_l2norm: bool, tiling: Tiling,
                    has_gama: bool = True, has_gamak: bool = False) -> tuple[int, int]:
    """(bytes of the queues and l2NormBuff_, bytes carved out of tmpBuff) that InitLocalBuffers uses."""
    a_k, a_v, v = _align(dk, 16), _align(dv, 16), tiling.v_step
    buffers = [MAX_MTP * a_k * 2, MAX_MTP * a_k * 2, MAX_MTP * a_v * 2, a_k * v * state_bytes, MAX_MTP * nv * 2]
    buffers += [MAX_MTP * nv * 4] if has_gama else []
    buffers += [MAX_MTP * a_k * 4] if has_gamak else []
    buffers += [MAX_MTP * a_k * 4 + MAX_MTP * 4] if use_l2norm else []
    buffers += [a_k * v * state_bytes] * tiling.state_out_buffers + [v * 2] * tiling.attn_out_buffers
    carved = 2 * v * 4 + MAX_MTP * a_v * 4 + 2 * MAX_MTP * a_k * 4 + 2 * a_k * v * 4 + _align(MAX_MTP * nv, 16) * 4
    return sum(_align(b, 32) for b in buffers), carved

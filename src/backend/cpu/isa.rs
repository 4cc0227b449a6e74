//! The instruction sets the CPU sweep is built for and the run-time choice among them, the
//! sweep threads' subnormal mode (DAZ/FTZ) and the prefetch hint.

use std::sync::OnceLock;

/// Instruction set of the sweep, chosen once at run time: the widest this CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 (F, VL, BW, DQ) with FMA.
    Avx512,
    /// AVX2 with FMA.
    Avx2Fma,
    /// What the build targets (SSE2 on x86-64, where `mul_add` is a correct but slow library call).
    Portable,
}

impl Isa {
    /// The widest instruction set available here (detected once).
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| [Isa::Avx512, Isa::Avx2Fma].into_iter().find(|i| i.available()).unwrap_or(Isa::Portable))
    }

    /// Whether this CPU runs code built for `self`.
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2Fma.available()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512dq")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "AVX-512",
            Isa::Avx2Fma => "AVX2+FMA",
            Isa::Portable => "portable",
        }
    }
}

/// While alive, this thread's SSE/AVX arithmetic reads subnormal inputs as zero and writes
/// subnormal results as zero (MXCSR's DAZ and FTZ bits); dropping it restores the thread's mode.
/// A no-op off x86-64.
pub(super) struct SubnormalsAsZero {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

impl SubnormalsAsZero {
    #[cfg(target_arch = "x86_64")]
    const DAZ_FTZ: u32 = (1 << 6) | (1 << 15);

    pub(super) fn enter() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_mxcsr();
            write_mxcsr(saved | Self::DAZ_FTZ);
            SubnormalsAsZero { saved }
        }
        #[cfg(not(target_arch = "x86_64"))]
        SubnormalsAsZero {}
    }
}

impl Drop for SubnormalsAsZero {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        write_mxcsr(self.saved);
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) fn read_mxcsr() -> u32 {
    let mut v = 0u32;
    // SAFETY: stmxcsr stores the 4-byte control register to a valid, writable u32.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack, preserves_flags)) };
    v
}

#[cfg(target_arch = "x86_64")]
pub(super) fn write_mxcsr(v: u32) {
    // SAFETY: ldmxcsr loads a control word that read_mxcsr produced, with only DAZ and FTZ
    // (valid, non-reserved bits) changed; no exception is unmasked.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v, options(nostack, readonly, preserves_flags)) };
}

/// A hint to bring the cache line at `p` into L1; no effect off x86-64.
#[inline(always)]
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

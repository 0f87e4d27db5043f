//! SplitMix64: a tiny, well-known PRNG. The demo's activity and credentials must be reproducible
//! from a seed, and a few lines here avoid a dependency.

#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high` (the modulo bias is negligible for the small ranges used here).
    pub(crate) fn between(&mut self, low: u64, high: u64) -> u64 {
        debug_assert!(low <= high);
        let span = high.saturating_sub(low).saturating_add(1);
        low + self.next_u64() % span
    }

    /// True one time in `one_in` on average.
    pub(crate) fn one_in(&mut self, one_in: u64) -> bool {
        self.next_u64() % one_in.max(1) == 0
    }

    /// One element of a non-empty slice; `None` when it is empty.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        let index = self.next_u64() % items.len() as u64;
        items.get(usize::try_from(index).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_ranges_hold() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let n = a.between(5, 20);
            assert!((5..=20).contains(&n));
            b.between(5, 20);
        }
        assert_ne!(SplitMix64::new(1).next_u64(), SplitMix64::new(2).next_u64());
        assert_eq!(a.pick::<u8>(&[]), None);
        assert_eq!(a.pick(&[3]), Some(&3));
    }
}

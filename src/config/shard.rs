//! Sharding: N replicas split the configured accounts with no overlap and no gap. An account
//! belongs to shard `fnv1a(name) % count`; FNV-1a is fixed (unlike std's hasher), so every
//! replica, of any version on any machine, computes the same split, and adding an account
//! moves no other account.

/// This replica's part of the accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 {
            return Err("--shard.count must be at least 1".into());
        }
        if index >= count {
            return Err(format!("--shard.index {index} must be below --shard.count {count} (shards count from 0)"));
        }
        Ok(Self { index, count })
    }

    pub fn owns(self, account: &str) -> bool {
        fnv1a(account.as_bytes()) % u64::from(self.count) == u64::from(self.index)
    }
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_account_belongs_to_exactly_one_shard() {
        let names: Vec<String> = (0..1000).map(|i| format!("sub-{i}")).collect();
        for count in 1..=7 {
            let shards: Vec<Shard> = (0..count).map(|i| Shard::new(i, count).unwrap()).collect();
            for name in &names {
                assert_eq!(shards.iter().filter(|s| s.owns(name)).count(), 1, "{name} with {count} shards");
            }
            let smallest = shards.iter().map(|s| names.iter().filter(|n| s.owns(n)).count()).min().unwrap();
            assert!(smallest as u32 >= 1000 / count / 2, "{count} shards: one holds only {smallest}");
        }
    }

    #[test]
    fn the_split_is_fixed_across_versions() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn bad_shards_say_why() {
        assert!(Shard::new(0, 0).unwrap_err().contains("at least 1"));
        assert!(Shard::new(3, 3).unwrap_err().contains("below --shard.count 3"));
    }
}

//! The documented rate limit: weights per 10-second window, the IP budget shared by every
//! request, the UID budget per account. A sliding window (rather than fixed 10 s slots) keeps
//! tests deterministic: what is spent stays spent for exactly 10 s.

use std::collections::{HashMap, VecDeque};

const WINDOW_MS: i64 = 10_000;

#[derive(Debug)]
pub(crate) struct RateLimiter {
    /// Weight allowed per window for the IP and for each account; `None` is unlimited.
    budget: Option<u32>,
    ip: Window,
    uids: HashMap<String, Window>,
}

impl RateLimiter {
    pub(crate) fn new(budget: Option<u32>) -> Self {
        Self { budget, ip: Window::default(), uids: HashMap::new() }
    }

    /// Spends IP weight; `false` (nothing spent) when it would exceed the budget.
    pub(crate) fn spend_ip(&mut self, weight: u32, now_ms: i64) -> bool {
        self.ip.try_spend(self.budget, weight, now_ms)
    }

    /// Spends the weight of one account, named by its api key.
    pub(crate) fn spend_uid(&mut self, api_key: &str, weight: u32, now_ms: i64) -> bool {
        let budget = self.budget;
        self.uids.entry(api_key.to_owned()).or_default().try_spend(budget, weight, now_ms)
    }
}

/// Weight spent in the last window, oldest first.
#[derive(Debug, Default)]
struct Window {
    spent: VecDeque<(i64, u32)>,
    total: u32,
}

impl Window {
    fn try_spend(&mut self, budget: Option<u32>, weight: u32, now_ms: i64) -> bool {
        let Some(budget) = budget else {
            return true;
        };
        while let Some(&(at, old)) = self.spent.front() {
            if at > now_ms - WINDOW_MS {
                break;
            }
            self.total -= old;
            self.spent.pop_front();
        }
        if self.total.saturating_add(weight) > budget {
            return false;
        }
        self.spent.push_back((now_ms, weight));
        self.total += weight;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_and_uid_budgets_are_separate_and_free_up_after_ten_seconds() {
        let mut limiter = RateLimiter::new(Some(10));
        assert!(limiter.spend_uid("a", 5, 0));
        assert!(limiter.spend_uid("a", 5, 1));
        assert!(!limiter.spend_uid("a", 5, 2));
        assert!(limiter.spend_uid("b", 5, 2), "each account has its own budget");
        assert!(limiter.spend_ip(10, 2), "the IP budget is counted apart");
        assert!(!limiter.spend_ip(1, 9_999));
        assert!(!limiter.spend_uid("a", 5, 9_999));
        assert!(limiter.spend_uid("a", 5, 10_000));
        assert!(!limiter.spend_uid("a", 5, 10_000));
        assert!(limiter.spend_ip(10, 10_002));
    }

    #[test]
    fn no_budget_means_unlimited() {
        let mut limiter = RateLimiter::new(None);
        assert!((0..10_000).all(|i| limiter.spend_ip(100, i) && limiter.spend_uid("a", 100, i)));
    }
}

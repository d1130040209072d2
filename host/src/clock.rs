//! The host's clock in Unix seconds: what signed requests' proofs are
//! judged by (`clock.now`), replay pairs and subscriptions expire by.

/// Now, in whole Unix seconds (0 before the epoch).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

//! RFC 3339 UTC timestamps from the host clock.

use lab_guest::lab::platform::clock;

/// The host's current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_rfc3339() -> String {
    let now = clock::now();
    rfc3339(now.seconds, now.nanoseconds)
}

/// `seconds` since the Unix epoch (and a sub-second part) as RFC 3339 UTC with
/// milliseconds.
pub fn rfc3339(seconds: u64, nanoseconds: u32) -> String {
    let days = (seconds / 86_400) as i64;
    let secs_of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        nanoseconds / 1_000_000
    )
}

/// `seconds` since the Unix epoch as RFC 3339 UTC with exactly six
/// fractional digits (microseconds), e.g. `2026-11-22T14:10:10.123456Z`.
pub fn rfc3339_micros(seconds: u64, nanoseconds: u32) -> String {
    let days = (seconds / 86_400) as i64;
    let secs_of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        nanoseconds / 1_000
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01, by the
/// era-based method (400-year cycles of 146,097 days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5_000_000), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_392_000, 0), "2026-11-23T00:00:00.000Z");
        assert_eq!(
            rfc3339(4_107_542_399, 999_999_999),
            "2100-02-28T23:59:59.999Z"
        );
    }
}

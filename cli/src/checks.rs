//! How labctl reports an offline verification: one line per check.

use lab_coord_client::Check;

use crate::failure::Failure;

/// Prints `ok` (with what it found, when it says) or `FAIL` with its
/// reason for each check; an error
/// (exit 5, as `unverified`) when any failed. `what` names what was
/// verified (`the admission`, `the export`, ...).
pub fn report(checks: &[Check], what: &str) -> Result<(), Failure> {
    for check in checks {
        if check.passed && check.detail.is_empty() {
            println!("ok    {}", check.name);
        } else if check.passed {
            println!("ok    {}: {}", check.name, check.detail);
        } else {
            println!("FAIL  {}: {}", check.name, check.detail);
        }
    }
    let failed = checks.iter().filter(|c| !c.passed).count();
    if failed > 0 {
        return Err(Failure::Unverified(format!(
            "{failed} of {} checks of {what} failed",
            checks.len()
        )));
    }
    Ok(())
}

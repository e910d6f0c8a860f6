//! A state directory that cannot be written for a while: a full disk, a spent quota, a file
//! system (or a bind mount) turned read-only, a directory whose write permission was taken
//! away. Nothing is wrong with the loop then, and nothing it has is lost: a write that meets it
//! waits and is tried again, and the step that runs goes on. A full disk is never a failed
//! attempt, nor a reason for a runner or a supervisor to die.

use std::time::Duration;

use nix::errno::Errno;

/// The errors that say "no room, or no writing, here for now".
const UNWRITABLE: [Errno; 4] = [Errno::ENOSPC, Errno::EDQUOT, Errno::EROFS, Errno::EACCES];

/// The first wait before a write is tried again; it doubles up to [`MAX_WAIT`].
pub(crate) const FIRST_WAIT: Duration = Duration::from_millis(100);

/// The longest wait between two tries.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(2);

/// Whether `e` says the file system cannot be written for now.
#[must_use]
pub(crate) fn is_unwritable(e: &std::io::Error) -> bool {
    e.raw_os_error()
        .is_some_and(|n| UNWRITABLE.iter().any(|u| *u as i32 == n))
}

/// The error in `e`'s chain that says the file system cannot be written for now (an
/// `io::Error` or an errno), as the OS words it (`Read-only file system (os error 30)`).
#[must_use]
pub(crate) fn cause(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return is_unwritable(io).then(|| io.to_string());
        }
        let errno = *c.downcast_ref::<Errno>()?;
        UNWRITABLE
            .contains(&errno)
            .then(|| std::io::Error::from(errno).to_string())
    })
}

/// The wait after `waits` tries that met an unwritable file system: [`FIRST_WAIT`], doubled
/// each time, at most [`MAX_WAIT`].
#[must_use]
pub(crate) fn backoff(waits: u32) -> Duration {
    FIRST_WAIT.saturating_mul(1 << waits.min(8)).min(MAX_WAIT)
}

/// Runs `op` until it succeeds or fails for another reason than an unwritable file system;
/// each time it meets one, `waiting` is told why (and how many times before) and the call
/// waits ([`backoff`]) before trying again. For a writer that has nothing better to do than
/// wait: a supervisor whose command ended and whose record must get out.
///
/// # Errors
/// The first error of `op` that is not an unwritable file system.
pub(crate) fn retry<T>(
    mut op: impl FnMut() -> anyhow::Result<T>,
    mut waiting: impl FnMut(&str, u32),
) -> anyhow::Result<T> {
    let mut waits = 0;
    loop {
        match op() {
            Err(e) => match cause(&e) {
                Some(why) => {
                    waiting(&why, waits);
                    std::thread::sleep(backoff(waits));
                    waits += 1;
                }
                None => return Err(e),
            },
            ok => return ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn a_full_or_read_only_file_system_is_told_apart_from_other_failures() {
        let full = std::io::Error::from_raw_os_error(Errno::ENOSPC as i32);
        let wrapped = anyhow::Error::new(full).context("while writing M1.md");
        assert!(
            cause(&wrapped).unwrap().contains("No space left on device"),
            "{wrapped:#}"
        );
        let ro = anyhow::Error::new(Errno::EROFS).context("while renaming");
        assert!(cause(&ro).unwrap().contains("Read-only file system"));
        let gone = std::io::Error::from_raw_os_error(Errno::ENOENT as i32);
        assert_eq!(cause(&anyhow::Error::new(gone)), None);
        assert_eq!(cause(&anyhow::anyhow!("a bug")), None);
    }

    #[test]
    fn a_write_is_tried_again_while_the_disk_is_full_and_other_errors_end_it() {
        let mut tries = 0;
        let mut told = Vec::new();
        let got = retry(
            || {
                tries += 1;
                if tries < 3 {
                    Err(std::io::Error::from_raw_os_error(Errno::ENOSPC as i32))
                        .context("while writing exit.json")
                } else {
                    Ok(tries)
                }
            },
            |why, n| told.push((why.to_owned(), n)),
        );
        assert_eq!(got.unwrap(), 3);
        assert_eq!(told.len(), 2);
        assert_eq!(told[1].1, 1);
        let other: anyhow::Result<()> = retry(|| anyhow::bail!("a bug"), |_, _| unreachable!());
        assert_eq!(other.unwrap_err().to_string(), "a bug");
        assert_eq!(backoff(0), FIRST_WAIT);
        assert_eq!(backoff(30), MAX_WAIT);
    }
}

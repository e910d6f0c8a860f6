//! The command line a process shows (`ps`, `/proc/<pid>/cmdline`), rewritten in place.
//!
//! A supervisor forked by the starter (see [`super::starter`]) would show the starter's
//! command line; it rewrites it to `loop __supervise DIR`, what a supervisor started as its
//! own process shows, so that a person (and the tests' look for processes left running in a
//! directory) still sees which task it owns. The kernel shows the bytes between the
//! process's `arg_start` and `arg_end` (`/proc/self/stat`, fields 48 and 49): the argument
//! strings as they were passed, on the process's own stack. They are overwritten in place,
//! as `setproctitle` does; the starter was started with a long last argument to leave room.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Where the argument strings are: `[start, end)` in this process's memory.
fn args_area() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields = super::procfs::stat_fields(&stat)?;
    // Field 3 (state) is at 0: arg_start (48) and arg_end (49) at 45 and 46.
    let start: usize = fields.get(45)?.parse().ok()?;
    let end: usize = fields.get(46)?.parse().ok()?;
    (start != 0 && end > start).then_some((start, end))
}

/// The bytes of a command line: each argument followed by a NUL, in `room` bytes at most (the
/// last argument cut short to fit), the rest NULs.
fn encode(args: &[&OsStr], room: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = Vec::with_capacity(room);
    for a in args {
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    bytes.truncate(room.saturating_sub(1));
    bytes.resize(room, 0);
    bytes
}

/// Makes this process show `args` as its command line. Call only while this process has a
/// single thread. Whether it could (no `/proc`: the command line stays as it was).
pub(crate) fn set(args: &[&OsStr]) -> bool {
    let Some((start, end)) = args_area() else {
        return false;
    };
    let bytes = encode(args, end - start);
    // SAFETY: `[start, end)` is this process's own argument strings, on its stack (the
    // kernel says where, in /proc/self/stat), mapped and writable for the process's whole
    // life. Nothing else reads them while this single thread writes: the standard library
    // copied what it needed from them at start-up, and `std::env::args` is not called again.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), start as *mut u8, bytes.len());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_fills_its_room_and_is_cut_to_fit() {
        let args = [
            OsStr::new("loop"),
            OsStr::new("__supervise"),
            OsStr::new("/d"),
        ];
        assert_eq!(
            encode(&args, 24),
            b"loop\0__supervise\0/d\0\0\0\0\0".to_vec()
        );
        assert_eq!(encode(&args, 8), b"loop\0__\0".to_vec());
    }
}

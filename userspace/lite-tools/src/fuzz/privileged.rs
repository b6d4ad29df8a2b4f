//! The privileged calls, made by a process without privilege.
//!
//! `lite_join`, `lite_leave` and writing LITE's settings in debugfs (the
//! QoS parameters, the membership timings, the RPC fault injection) need
//! `CAP_NET_ADMIN`. Made by the fuzzer as root they would disturb the
//! cluster, so a child drops to user and group 65534 (`nobody`) and makes
//! them, with every kind of argument, over and over: each must fail with
//! exactly `EPERM`, checked before anything else. The settings files are
//! opened by root before the child drops its privilege (nobody could not
//! open them), so the write reaches LITE's own check; what is written is
//! the value the setting already has (0, which disarms, for the fault
//! injection), so that even a write that wrongly went through changes
//! nothing. Once a join got through the check, no leave is tried.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use lite::sys::{CM_DEFAULT_PORT, LEAVE_FORCE};

use super::calls::{args, issue, Syscall};
use super::memory::{KERNEL_ADDRESS, LOW_PAGE};
use super::report::{self, call_and_result};
use super::rng::Rng;
use super::shared::{now_ms, Shared, UNPRIVILEGED};
use crate::cluster_test::privilege::credentials_of;
use crate::debugfs::{
    self, QosParam, DEBUGFS_DIR, HEARTBEAT_FILE, MANAGER_TIMEOUT_FILE, RPC_FAULT_FILE,
};
use crate::kernel::NOBODY;

/// Besides the QoS parameters.
const TIMINGS: [&str; 2] = [HEARTBEAT_FILE, MANAGER_TIMEOUT_FILE];

/// Opened for writing by root.
pub(crate) struct Setting {
    name: &'static str,
    file: File,
    value: String,
}

/// Also names the settings that could not be opened.
pub(crate) fn open_settings() -> (Vec<Setting>, Vec<String>) {
    let mut settings = Vec::new();
    let mut missing = Vec::new();
    let open = |name: &str| {
        OpenOptions::new()
            .write(true)
            .open(format!("{DEBUGFS_DIR}/{name}"))
    };
    let qos = QosParam::ALL.map(QosParam::file_name);
    for name in qos.into_iter().chain(TIMINGS) {
        let value = debugfs::read_file(name).map(|text| text.trim().to_string());
        match (value, open(name)) {
            (Ok(value), Ok(file)) if !value.is_empty() => {
                settings.push(Setting { name, file, value })
            }
            (Err(error), _) | (_, Err(error)) => missing.push(format!("{name}: {error}")),
            _ => missing.push(format!("{name}: empty")),
        }
    }
    match open(RPC_FAULT_FILE) {
        Ok(file) => settings.push(Setting {
            name: RPC_FAULT_FILE,
            file,
            value: "0".to_string(),
        }),
        Err(error) => missing.push(format!("{RPC_FAULT_FILE}: {error}")),
    }
    (settings, missing)
}

/// For good: no supplementary group, user and group [`NOBODY`], and with
/// them every capability.
fn drop_privilege() -> io::Result<()> {
    // SAFETY: these calls only change the credentials of this process,
    // which has a single thread.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(NOBODY, NOBODY, NOBODY) != 0
            || libc::setresuid(NOBODY, NOBODY, NOBODY) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

pub(crate) struct UnprivilegedPlan<'a> {
    pub(crate) seed: u64,
    pub(crate) me: u32,
    pub(crate) cm: Ipv4Addr,
    pub(crate) deadline_ms: u64,
    pub(crate) shared: &'static Shared,
    pub(crate) settings: &'a mut [Setting],
}

pub(crate) fn unprivileged_main(plan: UnprivilegedPlan<'_>) -> i32 {
    let shared = plan.shared;
    let origin = format!("node {} unprivileged process", plan.me);
    let dropped = drop_privilege()
        .map_err(|error| error.to_string())
        .and_then(|()| credentials_of(NOBODY));
    if let Err(reason) = dropped {
        report::alarm(shared, UNPRIVILEGED, &origin, "dropping root", &reason);
        return 1;
    }
    let addresses: Vec<CString> = [
        plan.cm.to_string(),
        "not-an-ip".to_string(),
        String::new(),
        "255.255.255.255.255".to_string(),
        "1.2.3.4".to_string(),
    ]
    .into_iter()
    .filter_map(|text| CString::new(text).ok())
    .collect();
    let mut pointers: Vec<u64> = addresses.iter().map(|a| a.as_ptr() as u64).collect();
    pointers.extend([0, KERNEL_ADDRESS, LOW_PAGE, u64::MAX]);
    let mut rng = Rng::for_stream(plan.seed, plan.me, UNPRIVILEGED as u32, 0);
    let slot = &shared.procs[UNPRIVILEGED].slots[0];
    let mut join_went_through = false;
    let mut step = 0u64;
    while now_ms() < plan.deadline_ms && !shared.stopped() {
        let mut step_rng = rng.split();
        let roll = step_rng.below(100);
        // What was tried, and what was wrong with its result, if anything.
        let (what, wrong) = if roll < 60 || plan.settings.is_empty() {
            let call = if roll < 35 || join_went_through {
                Syscall::Join
            } else {
                Syscall::Leave
            };
            let max = u64::from(u32::MAX);
            let args = if call == Syscall::Join {
                let cm_ip = step_rng.pick(&pointers).copied().unwrap_or(0);
                let cm_port = step_rng.choose(&[CM_DEFAULT_PORT.into(), 0, 65536, max]);
                let ib_port = step_rng.choose(&[1, 0, 2, max]);
                args(&[cm_ip, cm_port, ib_port])
            } else {
                args(&[step_rng.choose(&[0, LEAVE_FORCE.into(), 2, max])])
            };
            slot.begin(call, step, &args, 0);
            // SAFETY: the address pointers are NUL-terminated strings
            // that live until the end of this function, or addresses the
            // kernel rejects; lite_leave takes no pointer.
            let ret = unsafe { issue(call, args) };
            slot.end();
            shared.procs[UNPRIVILEGED].count(call, ret);
            let refused = ret == -i64::from(libc::EPERM);
            join_went_through |= !refused && call == Syscall::Join;
            let wrong = "a process without CAP_NET_ADMIN must get -EPERM, checked first";
            (
                call_and_result(call, &args, ret),
                (!refused).then(|| wrong.to_string()),
            )
        } else {
            let setting = &mut plan.settings[step_rng.index(plan.settings.len())];
            let written = setting
                .file
                .write(format!("{}\n", setting.value).as_bytes());
            let refused = matches!(&written, Err(e) if e.raw_os_error() == Some(libc::EPERM));
            let (value, name, fd) = (&setting.value, setting.name, setting.file.as_raw_fd());
            let what = format!("writing {value:?} to {DEBUGFS_DIR}/{name} (fd {fd})");
            let wrong = format!("a process without CAP_NET_ADMIN must get EPERM, got {written:?}");
            (what, (!refused).then_some(wrong))
        };
        if let Some(reason) = wrong {
            let origin = report::origin(plan.me, UNPRIVILEGED, 0, step);
            report::alarm(shared, UNPRIVILEGED, &origin, &what, &reason);
        }
        step += 1;
        std::thread::sleep(Duration::from_millis(step_rng.between(20, 120)));
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_debugfs_is_reported_not_fatal() {
        // On a host without LITE, nothing can be opened; every file is named.
        if std::path::Path::new(DEBUGFS_DIR).exists() {
            return;
        }
        let (settings, missing) = open_settings();
        assert!(settings.is_empty());
        assert_eq!(missing.len(), QosParam::ALL.len() + TIMINGS.len() + 1);
        assert!(missing.iter().any(|m| m.starts_with("rpc_fault_next: ")));
    }
}

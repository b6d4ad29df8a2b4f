//! The test guests' Soft-RoCE devices: `rxe0` on `eth0`, which every guest
//! brings up at boot, and a second device, `rxe1` on `eth1`, that the
//! failure test's leaver adds to join on it and then removes under
//! traffic; and LITE's `device` module parameter, which names the device
//! a node joins with.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// LITE's `device` module parameter (present whether LITE is a module or
/// built in).
pub const DEVICE_PARAM_FILE: &str = "/sys/module/lite/parameters/device";

/// The device every guest brings up at boot, and its network interface.
pub const FIRST_DEVICE: (&str, &str) = ("rxe0", "eth0");

/// The second device, on the guest's second network interface.
pub const SECOND_DEVICE: (&str, &str) = ("rxe1", "eth1");

const ACTIVE_WAIT: Duration = Duration::from_secs(30);

/// An IPv4 address with its prefix length, as `ip addr add` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceAddress {
    /// The address.
    pub addr: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
}

impl InterfaceAddress {
    /// Parses `A.B.C.D/LEN`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not ADDRESS/LENGTH"))?;
        let addr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
        let prefix = prefix
            .parse()
            .ok()
            .filter(|&len| len <= 32)
            .ok_or_else(|| format!("{prefix:?} is not a prefix length (0 to 32)"))?;
        Ok(InterfaceAddress { addr, prefix })
    }
}

impl fmt::Display for InterfaceAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// A change of the guest's second RDMA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondDevice {
    /// Gives the second interface this address, creates the second device
    /// on it, waits until its port is active, and names it in the `device`
    /// parameter, so that the next join uses it while the first device
    /// stays.
    Add(InterfaceAddress),
    /// Names the first device in the `device` parameter again and deletes
    /// the second device, which takes a node joined on it out of its
    /// cluster; then takes the second interface's address away.
    Remove,
}

/// Makes `step` happen on this guest.
pub fn change_second_device(step: SecondDevice) -> Result<(), String> {
    let (device, netdev) = SECOND_DEVICE;
    match step {
        SecondDevice::Add(address) => {
            // Both interfaces are on one network: each answers ARP for its
            // own address only and sends with it, so that packets for a
            // device's address reach that device's interface.
            for (setting, value) in [("arp_ignore", "1"), ("arp_announce", "2")] {
                let file = format!("/proc/sys/net/ipv4/conf/all/{setting}");
                std::fs::write(&file, value).map_err(|e| format!("writing {file}: {e}"))?;
            }
            run_tool("ip", &["addr", "add", &address.to_string(), "dev", netdev])?;
            run_tool("ip", &["link", "set", netdev, "up"])?;
            run_tool(
                "rdma",
                &["link", "add", device, "type", "rxe", "netdev", netdev],
            )?;
            wait_active(device)?;
            write_device_param(device)
        }
        SecondDevice::Remove => {
            write_device_param(FIRST_DEVICE.0)?;
            run_tool("rdma", &["link", "delete", device])?;
            run_tool("ip", &["addr", "flush", "dev", netdev])?;
            run_tool("ip", &["link", "set", netdev, "down"])
        }
    }
}

/// The `device` parameter's value, without its newline.
pub fn read_device_param() -> Result<String, String> {
    std::fs::read_to_string(DEVICE_PARAM_FILE)
        .map(|value| value.trim().to_string())
        .map_err(|e| format!("reading {DEVICE_PARAM_FILE}: {e}"))
}

/// Sets the `device` parameter.
pub fn write_device_param(name: &str) -> Result<(), String> {
    std::fs::write(DEVICE_PARAM_FILE, name)
        .map_err(|e| format!("writing {name:?} to {DEVICE_PARAM_FILE}: {e}"))
}

fn wait_active(name: &str) -> Result<(), String> {
    let state = Path::new("/sys/class/infiniband")
        .join(name)
        .join("ports/1/state");
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&state).unwrap_or_default();
        if text.contains("ACTIVE") {
            return Ok(());
        }
        if started.elapsed() >= ACTIVE_WAIT {
            return Err(format!(
                "port 1 of {name} is not active after {} s (state {:?})",
                ACTIVE_WAIT.as_secs(),
                text.trim()
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `tool` with `args`; its output and status make the error.
pub fn run_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {tool}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{tool} {}: {}: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_addresses_parse_and_print_as_ip_takes_them() {
        let address = InterfaceAddress::parse("10.77.0.103/24").unwrap();
        assert_eq!(address.addr, Ipv4Addr::new(10, 77, 0, 103));
        assert_eq!(address.to_string(), "10.77.0.103/24");
        for bad in ["10.77.0.103", "10.77.0/24", "10.77.0.1/33", "x/24"] {
            assert!(InterfaceAddress::parse(bad).is_err(), "{bad}");
        }
    }
}

//! The seccomp filter a command step gets when the network is off and no network namespace
//! holds it (`[sandbox] namespaces = false`, or a kernel that refuses them). Landlock refuses
//! TCP connect and bind but knows no other socket, so a UDP datagram (a DNS query to the
//! resolver: tunnelling) or a raw packet would still leave the step. The filter refuses, with
//! `EACCES` as Landlock does:
//!
//! - every Internet socket but a TCP stream (UDP, raw, SCTP, MPTCP…);
//! - every family but Unix, Internet and netlink (packet sockets, vsock to a VM's host…);
//! - `io_uring_setup`, whose rings can open sockets without the `socket` system call.
//!
//! Unix datagram sockets (syslog, D-Bus, systemd's notify) keep working, and netlink (which
//! `getaddrinfo` asks for the machine's addresses). Without a datagram socket there is no
//! `sendto` or `sendmsg` to another host, so those need no rule. Built with `seccompiler`
//! (rust-vmm's, which Firecracker uses). Like `sandbox_exec.rs`, this file depends on nothing
//! else of ocflow.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The socket families a step may open (Internet ones only as TCP).
const ALLOWED_FAMILIES: [libc::c_int; 4] = [
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// Why the socket filter is not in place (the launcher stops the command: without it the
/// step could send UDP past the network rule).
#[derive(Debug, thiserror::Error)]
pub enum SocketFilterError {
    /// The filter could not be compiled for this architecture.
    #[error("cannot build the socket filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    /// The kernel refused it (no seccomp, or a filter already forbids adding one).
    #[error("cannot install the socket filter: {0}")]
    Install(#[from] seccompiler::Error),
}

/// Installs the filter on this process and whatever it starts; it cannot be lifted.
pub fn refuse_datagrams() -> Result<(), SocketFilterError> {
    let program = program()?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}

/// The filter, compiled for this machine's architecture.
fn program() -> Result<BpfProgram, seccompiler::BackendError> {
    let condition = |arg: u8, op: SeccompCmpOp, value: libc::c_int| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64)
    };
    // Rules match when all their conditions do; a call matching any rule is refused.
    let mut socket = vec![SeccompRule::new(
        ALLOWED_FAMILIES
            .iter()
            .map(|family| condition(0, SeccompCmpOp::Ne, *family))
            .collect::<Result<_, _>>()?,
    )?];
    for family in [libc::AF_INET, libc::AF_INET6] {
        // The type's low four bits are the kind; the rest are flags (SOCK_CLOEXEC…).
        for kind in (0..16).filter(|kind| *kind != libc::SOCK_STREAM) {
            socket.push(SeccompRule::new(vec![
                condition(0, SeccompCmpOp::Eq, family)?,
                condition(1, SeccompCmpOp::MaskedEq(0xf), kind)?,
            ])?);
        }
        socket.push(SeccompRule::new(vec![
            condition(0, SeccompCmpOp::Eq, family)?,
            condition(2, SeccompCmpOp::Ne, 0)?,
            condition(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP)?,
        ])?);
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    if cfg!(target_arch = "x86_64") {
        // The x32 ABI shares the architecture's number, its calls marked by this bit.
        const X32: i64 = 0x4000_0000;
        rules.insert(X32 | libc::SYS_socket, socket.clone());
        rules.insert(X32 | libc::SYS_io_uring_setup, Vec::new());
    }
    rules.insert(libc::SYS_socket, socket);
    let arch = std::env::consts::ARCH.try_into()?;
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )?
    .try_into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine() {
        let program = program().unwrap();
        assert!(program.len() > 40, "{} instructions", program.len());
    }
}

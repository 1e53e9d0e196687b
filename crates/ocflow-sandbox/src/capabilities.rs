//! Capabilities a command never keeps. Without a user namespace of its own (`[sandbox]
//! namespaces = false`, or a container that refuses them), a step started by root kept root's
//! capabilities on the host: it could add an address to the host's `lo`, set its hostname, or
//! reboot it. The launcher drops every one — bounding, ambient, effective, permitted and
//! inheritable — and sets `no_new_privs`, so no exec (a setuid binary, a file capability) gives
//! any back.

use rustix::io::Errno;
use rustix::thread::{
    CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
    clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    set_no_new_privs,
};

/// Drops every capability of this process and sets `no_new_privs`. An unprivileged process
/// holds none, and cannot shrink its bounding set (which needs `CAP_SETPCAP`): `no_new_privs`
/// then keeps an exec from gaining any.
pub fn drop_all() -> Result<(), String> {
    let held = capabilities(None).map_err(|err| format!("cannot read capabilities: {err}"))?;
    // The bounding set first: shrinking it takes CAP_SETPCAP, which the last call drops.
    if held.effective.contains(CapabilitySet::SETPCAP) {
        for bit in 0..u64::BITS {
            let capability = CapabilitySet::from_bits_retain(1 << bit);
            match capability_is_in_bounding_set(capability) {
                Ok(true) => remove_capability_from_bounding_set(capability)
                    .map_err(|err| format!("cannot drop capability {bit}: {err}"))?,
                // Out already, or past the last this kernel knows.
                Ok(false) | Err(Errno::INVAL) => {}
                Err(err) => return Err(format!("cannot read the bounding set: {err}")),
            }
        }
    }
    // Kernels before 4.3 have no ambient set: nothing to clear there.
    match clear_ambient_capability_set() {
        Ok(()) | Err(Errno::INVAL) => {}
        Err(err) => return Err(format!("cannot clear the ambient capabilities: {err}")),
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(|err| format!("cannot drop capabilities: {err}"))?;
    set_no_new_privs(true).map_err(|err| format!("cannot set no_new_privs: {err}"))
}

/// Whether this process holds no capability in its effective, permitted or inheritable set.
pub fn none_held() -> bool {
    capabilities(None).is_ok_and(|held| {
        held.effective.is_empty() && held.permitted.is_empty() && held.inheritable.is_empty()
    })
}

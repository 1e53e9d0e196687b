//! ocflow in a container like OpenHands' docker runtime, made for real with the kernel: root in
//! a PID namespace of its own with a fresh `/proc` over which, as Docker does, files are masked
//! (`/dev/null` bound on them) and directories made read-only, with or without
//! `CAP_SYS_ADMIN`. There the kernel refuses a new `/proc` in any user namespace (the mounts
//! over the existing one are locked), so bubblewrap's `--proc` fails inside one.

use std::fs;
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::support::*;

/// What Docker does to a container's `/proc` (its default masked and read-only paths), then
/// the capabilities it leaves: `$1` is `keep` or `drop` for `CAP_SYS_ADMIN`, the rest is the
/// command to run, a child of the container's first process as in OpenHands' runtime (whose
/// server starts the agent's commands). Paths this kernel lacks are left out.
const DOCKER_PROC: &str = r#"set -e
admin=$1; shift
for file in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug /proc/latency_stats; do
  if [ -f "$file" ]; then mount --bind /dev/null "$file"; fi
done
for dir in /proc/acpi /proc/asound /proc/scsi; do
  if [ -d "$dir" ]; then mount -t tmpfs -o ro tmpfs "$dir"; fi
done
for path in /proc/bus /proc/fs /proc/irq /proc/sys /proc/sysrq-trigger; do
  if [ -e "$path" ]; then mount --bind "$path" "$path"; mount -o remount,bind,ro "$path"; fi
done
if [ "$admin" = drop ]; then
  set -- setpriv --inh-caps -sys_admin --bounding-set -sys_admin -- "$@"
fi
"$@"
"#;

/// Whether CAP_SYS_ADMIN is kept in the container (`docker run --cap-add SYS_ADMIN`) or
/// dropped (Docker's default).
#[derive(Clone, Copy, PartialEq)]
enum Admin {
    Keep,
    Drop,
}

/// `program` (with `sandbox`'s environment for ocflow) inside a Docker-like container.
fn in_container(sandbox: &Sandbox, admin: Admin, program: &str) -> Command {
    let mut command = sandbox.command_like_ocflow("unshare");
    command
        .args([
            "--pid",
            "--fork",
            "--mount",
            "--mount-proc",
            "--",
            "/bin/sh",
        ])
        .args(["-c", DOCKER_PROC, "docker-proc"])
        .arg(match admin {
            Admin::Keep => "keep",
            Admin::Drop => "drop",
        })
        .arg(program);
    command
}

/// Whether such a container can be made here: it takes root (CI runs as root; elsewhere the
/// test is skipped) and util-linux's `unshare` and `setpriv`.
fn containers_can_be_made(sandbox: &Sandbox) -> bool {
    if !require(Component::Bubblewrap) {
        return false;
    }
    let made = in_container(sandbox, Admin::Drop, "true")
        .output()
        .is_ok_and(|output| output.status.success());
    if !made && under_ci() {
        panic!("CI runs as root with util-linux: a Docker-like container must be possible");
    }
    if !made {
        skip("a Docker-like container needs root and util-linux's unshare and setpriv");
    }
    made
}

/// That the container is faithful: bubblewrap, asked for all its namespaces, cannot mount
/// `/proc` there, as in OpenHands' runtime.
fn assert_bubblewrap_cannot_mount_proc(sandbox: &Sandbox, admin: Admin) {
    let output = in_container(sandbox, admin, "bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev"])
        .args(["--proc", "/proc", "true"])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Can't mount proc"),
        "{}",
        stderr(&output)
    );
}

fn shell_step(id: &str, command: &str) -> Value {
    json!({"id": id, "operation": "execute_shell_command", "params": {"command": command}})
}

/// Runs a flow of three command steps with `ocflow run --plan` in the container; checks that
/// both ran and succeeded, and that exactly one warning was given; returns the output and the
/// first step's `sandbox_layers`.
fn run_command_steps(admin: Admin) -> Option<(Output, Value)> {
    // One container at a time: ocflow has the same small PID in each, and unlike Docker's
    // these share the host's cgroup hierarchy and temporary directory, where ocflow names its
    // start-up trial's group and directory after its PID.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    if !containers_can_be_made(&sandbox) {
        return None;
    }
    // Without CAP_SYS_ADMIN, bubblewrap's namespaces need a user namespace of their own.
    let user_namespaces = Command::new("unshare")
        .args(["--user", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if admin == Admin::Drop && !user_namespaces {
        if under_ci() {
            panic!("CI's machine allows user namespaces: this test needs one");
        }
        skip("this kernel refuses user namespaces (a container would get Landlock alone)");
        return None;
    }
    assert_bubblewrap_cannot_mount_proc(&sandbox, admin);
    let flow = json!([
        shell_step("one", "echo one > one.txt && cat a.txt"),
        {"id": "two", "operation": "run_tests", "depends_on": ["one"],
         "params": {"command": "cat one.txt"}},
        // A test suite's local server on the loopback, as many start one.
        shell_step(
            "loopback",
            "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); \
             s.listen(); c = socket.create_connection(s.getsockname()); print('ok')\""
        ),
    ]);
    let plan = sandbox.flow(&flow);
    let output = in_container(&sandbox, admin, env!("CARGO_BIN_EXE_ocflow"))
        // As in OpenHands' runtime, whose environment holds the key (no LLM is asked here).
        .env("LLM_API_KEY", "sk-container-test")
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(sandbox.result("t", "one")["stdout"], json!("a\n"));
    assert_eq!(sandbox.result("t", "two")["stdout"], json!("one\n"));
    assert_eq!(sandbox.result("t", "loopback")["stdout"], json!("ok\n"));
    for step in ["one", "two", "loopback"] {
        let status = sandbox.step_status("t", step);
        assert_eq!(status["status"], json!("succeeded"), "{status}");
        // Found at start-up: no step failed for it, nor was retried.
        assert_eq!(status["attempts"], json!(1), "{status}");
        assert!(
            matches!(status["auto_retries"].as_u64(), None | Some(0)),
            "{status}"
        );
    }
    let warnings: Vec<Value> = stdout(&output)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["type"] == "warning")
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "{warnings:?}\nstdout:\n{}\nstderr:\n{}",
        stdout(&output),
        stderr(&output)
    );
    let layers = sandbox.result("t", "one")["sandbox_layers"].clone();
    assert_eq!(sandbox.result("t", "two")["sandbox_layers"], layers);
    let journal = fs::read_to_string(sandbox.task_dir("t").join("journal.jsonl")).unwrap();
    let warned = warnings[0]["message"].as_str().unwrap();
    assert!(journal.contains(&json!(warned).to_string()), "{journal}");
    Some((output, layers))
}

#[test]
fn in_a_container_with_sys_admin_command_steps_keep_namespaces_without_overlays() {
    // bubblewrap makes its namespaces as root, but not inside the user namespace the launcher
    // makes for overlays: the start-up trial finds it, and the overlays go.
    let Some((output, layers)) = run_command_steps(Admin::Keep) else {
        return;
    };
    assert_eq!(layers["namespaces"], json!(true), "{layers}");
    assert_eq!(layers["caches"], json!("private"), "{layers}");
    let said = stdout(&output);
    assert!(said.contains("without overlays"), "{said}");
    assert!(said.contains("Can't mount proc"), "{said}");
}

#[test]
fn in_a_container_without_sys_admin_command_steps_keep_namespaces_but_the_pid_one() {
    // Docker's default: bubblewrap cannot make namespaces as root without the capability, nor
    // mount `/proc` in a user namespace; in one, it makes the others and binds the
    // container's `/proc`. The network is the step's own (its loopback works, nothing else is
    // reached), and the results say the sandbox is partial: other processes are in sight.
    let Some((output, layers)) = run_command_steps(Admin::Drop) else {
        return;
    };
    assert_eq!(layers["namespaces"], json!(true), "{layers}");
    assert_eq!(layers["proc"], json!("shared"), "{layers}");
    assert_eq!(layers["udp"], json!("blocked"), "{layers}");
    assert_eq!(layers["partial"], json!(true), "{layers}");
    let said = stdout(&output);
    assert!(said.contains("without a PID namespace"), "{said}");
    assert!(said.contains("bubblewrap"), "{said}");
    // What that means for the key is said in the same warning.
    assert!(said.contains("LLM_API_KEY"), "{said}");
}

//! `ocflow report`: the page of a flow with a retried step, a skipped one, a failed one, one
//! never reached and a file change, read as HTML and rendered in headless Chromium (every step
//! shown, no script error, the repository's and the model's `<script>` escaped and never run);
//! and the page of a flow whose planning failed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

/// Written into the repository by a step, so it reaches the page through the diff.
const FILE_SCRIPT: &str = "<script>document.title='pwned-by-file'</script>";
/// What the model gives as a recovery reason, shown in the timeline and the table.
const REASON_SCRIPT: &str = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">";
/// A step description, shown in the graph.
const DESCRIPTION_SCRIPT: &str = "<script>document.body.setAttribute('data-pwned','2')</script>";

const STEPS: [&str; 6] = ["write_page", "check", "lint", "lint_fix", "broken", "after"];

fn shell(id: &str, command: &str, deps: &[&str]) -> Value {
    json!({"id": id, "operation": "execute_shell_command", "params": {"command": command},
           "depends_on": deps})
}

/// Runs the flow: `check` fails once and is retried, `lint` fails and is skipped (with
/// `lint_fix`, which needs it), `broken` fails and the model aborts, so `after` never runs.
fn run_flow(sandbox: &Sandbox) -> Output {
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    // Role names are letters, digits, `_` and `-` since issue 14's review (a config may come
    // from an untrusted repository, and names reach terminals): the hostile text goes into the
    // step's description instead, which the report shows too.
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n",
    )
    .unwrap();
    let flag = sandbox.shared().join("flag");
    let check = format!(
        "if [ -f {0} ]; then echo ok; else touch {0}; exit 1; fi",
        flag.display()
    );
    let mut write = json!({"id": "write_page", "operation": "write_file",
        "description": DESCRIPTION_SCRIPT,
        "params": {"file_path": "page.html", "content": format!("<p>hello</p>\n{FILE_SCRIPT}\n")}});
    write["depends_on"] = json!([]);
    let flow = json!({"task": "Show <b>this</b> & that", "steps": [
        write,
        shell("check", &check, &["write_page"]),
        shell("lint", "exit 2", &["write_page"]),
        shell("lint_fix", "true", &["lint"]),
        shell("broken", "exit 3", &["check"]),
        shell("after", "true", &["broken"]),
    ]});
    // `check` and `lint` run at once and may fail in either order: each recovery is answered
    // for its step, once. The flow summary is refused, so the journal's summary is written.
    let strategy = |step: &str, answer: Value| {
        Rule::recovery_of(step)
            .reply(chat(&answer.to_string()))
            .times(1)
    };
    let llm = FakeLlm::with_rules(vec![
        strategy(
            "check",
            json!({"strategy": "retry", "reason": REASON_SCRIPT}),
        ),
        strategy(
            "lint",
            json!({"strategy": "skip", "reason": "lint is optional"}),
        ),
        strategy(
            "broken",
            json!({"strategy": "abort", "reason": "broken cannot work"}),
        ),
        Rule::flow_summary()
            .reply(status(500, "no summary in this test"))
            .times(1),
        // A flow that recovered ends with the reflection's call (issue 30 §4), refused too.
        Rule::reflection()
            .reply(status(500, "no reflection in this test"))
            .times(1),
    ]);
    let plan = sandbox.flow(&flow);
    sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap()
}

#[test]
fn the_report_shows_every_step_escapes_the_task_and_runs_in_a_browser() {
    let sandbox = Sandbox::new(&[("README.md", "hello\n")]);
    assert_exit(&run_flow(&sandbox), 1);
    let states: Vec<Value> = STEPS
        .iter()
        .map(|id| sandbox.step_status("t", id)["status"].clone())
        .collect();
    assert_eq!(
        states,
        [
            "succeeded",
            "succeeded",
            "skipped",
            "skipped",
            "failed",
            "pending"
        ]
        .map(|s| json!(s))
    );

    let output = sandbox.ocflow().args(["report", "t"]).output().unwrap();
    assert_exit(&output, 0);
    let path = PathBuf::from(stdout(&output).trim());
    assert_eq!(path, sandbox.task_dir("t").join("report.html"));
    let html = std::fs::read_to_string(&path).unwrap();
    eprintln!("report: {} ({} bytes)", path.display(), html.len());
    check_the_html(&html);

    let json_output = sandbox
        .ocflow()
        .args(["--json", "report", "t"])
        .output()
        .unwrap();
    assert_exit(&json_output, 0);
    let line: Value = serde_json::from_str(stdout(&json_output).trim()).unwrap();
    assert_eq!(
        line,
        json!({"version": 1, "type": "report", "task_id": "t",
               "path": path.display().to_string()})
    );

    if let Some(browser) = chromium() {
        check_in_the_browser(&browser, &path);
    }

    // A damaged task is shown, not refused: the page says what is gone instead of the diff.
    let output_file = sandbox.task_dir("t").join("write_page/output/page.html");
    std::fs::remove_file(output_file).unwrap();
    assert_exit(&sandbox.ocflow().args(["report", "t"]).output().unwrap(), 0);
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(
        html.contains("the recorded outputs of step write_page (page.html missing) are gone"),
        "{html}"
    );
}

/// What the page holds, read as text: every step, the states, the recovery decisions, the
/// diff's lines coloured, and every piece of the task escaped.
fn check_the_html(html: &str) {
    for id in STEPS {
        assert!(
            html.contains(&format!("data-step=\"{id}\"")),
            "{id} missing"
        );
    }
    for text in [
        "<span class=\"badge failed\">failed</span>",
        "recovery <code>retry</code>",
        "recovery <code>skip</code>",
        "recovery <code>abort</code>",
        "<span class=\"kind added\">added</span> page.html",
        "<span class=\"add\">+&lt;p&gt;hello&lt;/p&gt;</span>",
        "Show &lt;b&gt;this&lt;/b&gt; &amp; that",
        "&lt;script&gt;document.title=&#39;pwned-by-file&#39;&lt;/script&gt;",
        "&lt;img src=x onerror=&quot;",
        "&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;,&#39;2&#39;)",
    ] {
        assert!(html.contains(text), "the page lacks {text:?}");
    }
    for raw in [
        FILE_SCRIPT,
        REASON_SCRIPT,
        DESCRIPTION_SCRIPT,
        "<b>this</b>",
    ] {
        assert!(!html.contains(raw), "{raw:?} reached the page unescaped");
    }
    // Self-contained: nothing to fetch, and a policy that lets nothing else load or run.
    for external in ["<link", " src=\"", "@import", "url(http"] {
        assert!(!html.contains(external), "the page loads {external:?}");
    }
    assert!(html.contains("default-src 'none'"));
}

/// The rendered page: every step id, our script ran (`data-ready`), no error, none of the
/// injected markup ran; then a screenshot to look at.
fn check_in_the_browser(browser: &Path, page: &Path) {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", page.display());
    let started = Instant::now();
    let dump = headless(
        browser,
        profile.path(),
        &["--enable-logging=stderr", "--v=0", "--dump-dom", &url],
    );
    eprintln!("chromium --dump-dom took {:?}", started.elapsed());
    let dom = stdout(&dump);
    assert!(
        dom.contains("data-ready=\"yes\""),
        "the page's own script did not run:\n{dom}"
    );
    for id in STEPS {
        assert!(
            dom.contains(&format!("data-step=\"{id}\"")),
            "{id} not rendered"
        );
    }
    assert!(
        dom.contains("<div id=\"page-errors\" hidden=\"\"></div>"),
        "errors on the page:\n{dom}"
    );
    assert!(
        dom.contains("<title>ocflow report — t</title>"),
        "the title changed"
    );
    // The injected markup is on the page as text; had it run, it would have set an attribute.
    assert!(
        !dom.contains("data-pwned=\""),
        "injected markup ran:\n{dom}"
    );
    let log = stderr(&dump);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:#?}");

    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&screenshot);
    let shot = format!("--screenshot={}", screenshot.display());
    headless(
        browser,
        profile.path(),
        &["--hide-scrollbars", "--window-size=1280,2000", &shot, &url],
    );
    let png = std::fs::read(&screenshot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "no screenshot"
    );
    let kept = screenshot.with_file_name("report-example.html");
    std::fs::copy(page, &kept).unwrap();
    eprintln!(
        "screenshot: {} (of {})",
        screenshot.display(),
        kept.display()
    );
}

#[test]
fn a_flow_whose_planning_failed_has_a_report_that_says_so() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::in_order(vec![chat("no"), chat("still no"), chat("[]")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "do <it>"])
        .output()
        .unwrap();
    assert_exit(&output, 1);
    assert!(!sandbox.task_dir("t").join("flow.json").exists());
    let output = sandbox.ocflow().args(["report", "t"]).output().unwrap();
    assert_exit(&output, 0);
    let html = std::fs::read_to_string(sandbox.task_dir("t").join("report.html")).unwrap();
    assert!(
        html.contains("There is no flow: planning did not make one.")
            && html.contains("no valid flow after 3 answer(s)")
            && html.contains("do &lt;it&gt;"),
        "{html}"
    );
}

/// Chromium, or `None` (the browser check reported skipped) where it is not installed —
/// except under CI, which installs it (`.ci/run`) and must run the browser test.
fn chromium() -> Option<PathBuf> {
    if !require(Component::Chromium) {
        return None;
    }
    chromium_path()
}

/// Runs headless Chromium with a throwaway profile, killed if it takes over a minute (it can
/// hang on a broken display or D-Bus setup). Its output goes to files, which never fill up
/// and block it as a pipe would.
fn headless(browser: &Path, profile: &Path, args: &[&str]) -> Output {
    let (out_path, err_path) = (profile.join("stdout.txt"), profile.join("stderr.txt"));
    let mut child = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args(["--disable-extensions", "--disable-dev-shm-usage"])
        .arg(format!(
            "--user-data-dir={}",
            profile.join("profile").display()
        ))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    };
    assert!(
        output.status.success(),
        "chromium {args:?}: {}",
        stderr(&output)
    );
    output
}

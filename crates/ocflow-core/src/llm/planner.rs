//! The planner: asks the LLM to break a task into a flow. The prompt (from `prompts/`, laid
//! out fixed text first by `planner_prompt`) shows the operations generated from the registry,
//! the repository's files, the files the task names, and the task. The answer's JSON is
//! extracted and validated with the flow validator; on failure the model is asked again with
//! the exact problems, at most `MAX_ATTEMPTS` answers in all. A truncated answer is never acted
//! on. Every raw answer is kept in the task directory.

use std::fs;
use std::path::{Path, PathBuf};

use crate::flow::deliverables;
use crate::flow::ignore_rules;
use crate::flow::operations;
use crate::flow::path_rules::PathRules;
use crate::flow::policy::CommandPolicy;
use crate::flow::project_instructions::Selected;
use crate::flow::roles::Roles;
use crate::flow::task_files;
use crate::flow::test_command::{self, TestCommand, is_test_file};
use crate::flow::validate;
use crate::llm::answer;
use crate::llm::client::Llm;
use crate::llm::plan_shapes::{self, Choice, Shape};
use crate::llm::planner_prompt::{self, PromptParts};
use crate::llm::{evidence, reproduction};
use ocflow_model::flow::Flow;
use ocflow_model::llm::{ChatRequest, LlmError, LlmErrorKind, Message, ModelSettings};
use ocflow_model::prompt_template;
use ocflow_model::repo_path::{self, RepoPath};

const SYSTEM: &str = include_str!("../../../../prompts/plan_system.md");
const FIX: &str = include_str!("../../../../prompts/plan_fix.md");

/// Answers asked for, in all (the first and at most two re-asks).
pub(crate) const MAX_ATTEMPTS: usize = 3;
/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The LLM call itself failed (see `LlmError::transient`).
    #[error("the planner's LLM call failed: {0}")]
    Llm(#[from] LlmError),
    /// No usable flow after every attempt (permanent for this task and model).
    #[error(
        "no valid flow after {attempts} answer(s); the answers are in {}; last \
         problems:\n{problems}",
        dir.display()
    )]
    NoValidFlow {
        attempts: usize,
        dir: PathBuf,
        problems: String,
    },
    /// The model's plans do not fit the task (its prompt's example, placeholders, or files the
    /// task does not touch), after it was told once: an unrelated plan is never run.
    #[error(
        "the model's plan does not fit the task: {reason}; its answers are in {}",
        dir.display()
    )]
    Unfit { reason: String, dir: PathBuf },
    /// The model said the task cannot be done in a repository, and why (`{"refuse": …}`):
    /// permanent, the user's to change (exit 2, no flow).
    #[error("the model refused the task: {reason} (its answer is in {})", dir.display())]
    Refused { reason: String, dir: PathBuf },
    /// The plan changes code that nothing would check, and the model wrote no usable command
    /// that shows the task's problem, twice: its change could not be shown done (permanent for
    /// this task and model; the user's to change: exit 2).
    #[error(
        "nothing would check the change: the model wrote no command that shows the task's \
         problem ({reason}); say in the task what must pass once it is done (\"… so that \
         tests/test_x.py passes\", \"run the tests with: pytest -q\"); its answers are in {}",
        dir.display()
    )]
    Unchecked { reason: String, dir: PathBuf },
    #[error("cannot save the planner's answer in {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// What the planner made of one answer.
enum Judged {
    Plan(Flow, Vec<String>),
    /// The problems to send back, one `- ` line each.
    Problems(String),
    /// A valid plan that does not fit the task.
    Unfit(String),
    /// A valid plan the model is asked about once, whose answer then stands: a question only
    /// the model can answer (does the task ask for a file it names, or only ask a question?).
    Ask(String),
    /// The model's refusal, with its reason.
    Refused(String),
}

/// What the planner needs.
pub struct Planner<'a> {
    pub llm: &'a Llm,
    pub settings: &'a ModelSettings,
    pub rules: &'a PathRules,
    /// Directories never listed (the workspace).
    pub skip: Vec<PathBuf>,
    /// What planned commands may do.
    pub policy: CommandPolicy,
    /// Who may take which step; the planner is shown them and assigns one to every step.
    pub roles: &'a Roles,
    /// How the repository runs its tests (the library's guess, the one `run_tests` uses).
    pub test_commands: Vec<TestCommand>,
    /// Past failures on this repository like this task and what ended them (the failure
    /// memory's section, delimited), after the fixed text and the repository's facts, before
    /// the task; empty without any.
    pub past_experience: String,
    /// The repository's own instructions for agents, framed as its conventions
    /// (`flow::project_instructions`); after the fixed system text, before the task.
    pub conventions: Option<Selected>,
    /// The map of the repository's definitions for a task and the repository's files (the
    /// library's `map_repository`, `llm::planner_prompt::MAP_BUDGET` characters at most); none
    /// without a library that makes one.
    pub repo_map: Option<RepoMap<'a>>,
}

/// Makes the planner's map of the repository for a task and the repository's files.
pub type RepoMap<'a> = Box<dyn Fn(&str, &[RepoPath]) -> String + Send + Sync + 'a>;

impl Planner<'_> {
    /// Plans `task`: the flow, and what validation added to it (implied dependencies). Raw
    /// answers go to `answers_dir/plan-answer-N.md`. When no answer of the model's gives a
    /// usable plan, and the task names files to plan on, ocflow plans on them in the shape the
    /// model then chooses (`plan_shapes`); otherwise the planning's failure stands.
    pub async fn plan(
        &self,
        task: &str,
        answers_dir: &Path,
    ) -> Result<(Flow, Vec<String>), PlanError> {
        let files = list_files(&self.rules.repo, &self.skip);
        let system = match &self.conventions {
            Some(used) => format!("{}\n\n{}", SYSTEM.trim(), used.section),
            None => SYSTEM.trim().to_string(),
        };
        let messages = vec![
            Message::system(system),
            Message::user(self.first_prompt(task, &files)),
        ];
        let named = task_files::named(task, &files);
        let failure = match self
            .ask_for_plans(task, messages.clone(), (&named, &files), answers_dir)
            .await?
        {
            Ok(planned) => return Ok(planned),
            Err(failure) => failure,
        };
        self.plan_for_the_model(task, messages, (&named, &files), answers_dir, failure)
            .await
    }

    /// The plan ocflow writes when none of the model's could be used (`failure`): a change of
    /// each file the task names that is no test, with the whole task as its instructions, once
    /// the model has said the task asks for a change (`plan_shapes`). Made only where evidence
    /// the model cannot bend will judge it — the repository's tests, which must fail before
    /// the change and pass after it, else the model's reproduction, which must do the same —
    /// never for a question (an answer checked only by a command of the model's choosing could
    /// "answer" a task no repository can do). Otherwise the planning's failure stands; the
    /// model's refusal is its own.
    async fn plan_for_the_model(
        &self,
        task: &str,
        messages: Vec<Message>,
        (named, files): (&[RepoPath], &[RepoPath]),
        answers_dir: &Path,
        failure: PlanError,
    ) -> Result<(Flow, Vec<String>), PlanError> {
        // A task that names a file yet to be made asks for more than a change of the files it
        // names: only the model can plan that.
        let missing = task_files::missing(task, files);
        let targets = plan_shapes::targets(named);
        if targets.is_empty() || !missing.is_empty() {
            return Err(failure);
        }
        let asked =
            match plan_shapes::ask(self.llm, &self.settings.for_answer(1), &targets, task).await {
                Ok(asked) => asked,
                // No room left for the question: the planning's own failure is what happened.
                Err(error) if error.kind == LlmErrorKind::BudgetExhausted => return Err(failure),
                Err(error) => return Err(error.into()),
            };
        save(answers_dir, "shape-answer.md", &asked.answer)?;
        match asked.choice {
            Some(Choice::Change) => {}
            Some(Choice::Refuse(reason)) => {
                return Err(PlanError::Refused {
                    reason,
                    dir: answers_dir.to_path_buf(),
                });
            }
            Some(Choice::Answer) | None => return Err(failure),
        }
        let plan = plan_shapes::change(&targets, task);
        save(answers_dir, "plan-by-ocflow.json", &plan)?;
        let Judged::Plan(flow, mut notes) = self.judge(&plan, task, named, (&missing, files))
        else {
            return Err(failure);
        };
        let names: Vec<&str> = targets.iter().map(|t| t.as_str()).collect();
        notes.insert(
            0,
            format!(
                "the model's plans could not be used ({}); it said the task asks for a change, \
                 so ocflow planned a modify_code of {} with the task as its instructions",
                failure_in_brief(&failure),
                names.join(", "),
            ),
        );
        let judged = match self.test_commands.first() {
            // The repository's tests, failing before the change and passing after it: evidence
            // the model did not write, and no call to ask for it.
            Some(tests) => {
                let mut tried = flow;
                tried.task = task.to_string();
                notes.extend(deliverables::require_tests_as_reproduction(
                    &mut tried,
                    &tests.command,
                ));
                match self.policy.check(&tried.steps) {
                    None => self.roles.apply(tried).ok().map(|flow| (flow, notes)),
                    Some(_) => None,
                }
            }
            None => {
                // The conversation a reproduction is asked in: the plan as the model's answer.
                let mut conversation = messages;
                conversation.push(Message::assistant(plan));
                match self
                    .settle(flow, notes, task, named, conversation, answers_dir)
                    .await
                {
                    Ok(settled) => Some(settled),
                    Err(PlanError::Unchecked { .. }) => None,
                    Err(error) => return Err(error),
                }
            }
        };
        match judged {
            Some((mut flow, notes)) if reproduction::reproduces(&flow) => {
                plan_shapes::changes_wait_for_the_reproduction(&mut flow);
                Ok((flow, notes))
            }
            _ => Err(failure),
        }
    }

    /// The model's answers, asked again with their problems at most `MAX_ATTEMPTS` times in
    /// all: the first usable plan, settled (its reproduction or evidence asked for), or why
    /// none was (the outer error: the calls themselves failed).
    async fn ask_for_plans(
        &self,
        task: &str,
        mut messages: Vec<Message>,
        (named, files): (&[RepoPath], &[RepoPath]),
        answers_dir: &Path,
    ) -> Result<Result<(Flow, Vec<String>), PlanError>, PlanError> {
        let missing = task_files::missing(task, files);
        // Where ocflow can plan a change for the model (`plan_for_the_model`), the same
        // problem twice ends the re-asks: a third answer is the costliest call of a small
        // model's flow, and rarely the one that mends it.
        let fallback = missing.is_empty() && !plan_shapes::targets(named).is_empty();
        let mut problems = String::new();
        let mut answers = answer::Answers::default();
        let mut unfit_said = false;
        // Whether the model was asked about its plan (`Judged::Ask`): its next answer stands,
        // the same plan again included.
        let mut asked = false;
        // The problems of the answer before.
        let mut said = String::new();
        for attempt in 1..=MAX_ATTEMPTS {
            let request = ChatRequest {
                purpose: "planner".into(),
                settings: self.settings.for_answer(attempt),
                messages: messages.clone(),
                json: true,
                schema: Some(operations::flow_schema()),
                optional: false,
            };
            let reply = self.llm.chat(&request).await?;
            save(
                answers_dir,
                &format!("plan-answer-{attempt}.md"),
                &reply.content,
            )?;
            // Asked about its plan, the model may give the same plan again: it stands.
            if answers.repeats(&reply) && !asked {
                return Ok(Err(PlanError::NoValidFlow {
                    attempts: attempt,
                    dir: answers_dir.to_path_buf(),
                    problems: format!("{problems}\n{}", answer::REPEATED)
                        .trim()
                        .to_string(),
                }));
            }
            problems = if reply.is_truncated() {
                "- the answer was cut off before its end (the model hit its token limit): answer \
                 with a shorter flow, fewer steps, and no explanations"
                    .to_string()
            } else {
                let missing: &[RepoPath] = if asked { &[] } else { &missing };
                match self.judge(&reply.content, task, named, (missing, files)) {
                    Judged::Plan(flow, notes) => {
                        let mut conversation = messages.clone();
                        conversation.push(Message::assistant(reply.content.clone()));
                        return self
                            .settle(flow, notes, task, named, conversation, answers_dir)
                            .await
                            .map(Ok);
                    }
                    Judged::Refused(reason) => {
                        return Err(PlanError::Refused {
                            reason,
                            dir: answers_dir.to_path_buf(),
                        });
                    }
                    Judged::Unfit(reason) if unfit_said => {
                        return Ok(Err(PlanError::Unfit {
                            reason,
                            dir: answers_dir.to_path_buf(),
                        }));
                    }
                    Judged::Unfit(reason) => {
                        unfit_said = true;
                        format!("- {reason}")
                    }
                    Judged::Ask(question) => {
                        asked = true;
                        format!("- {question}")
                    }
                    Judged::Problems(problems) => problems,
                }
            };
            if fallback && !asked && attempt > 1 && problems == said {
                save(
                    answers_dir,
                    &format!("plan-answer-{attempt}.problems.txt"),
                    &problems,
                )?;
                return Ok(Err(PlanError::NoValidFlow {
                    attempts: attempt,
                    dir: answers_dir.to_path_buf(),
                    problems: format!("{problems}\n{}", answer::SAME_PROBLEM),
                }));
            }
            said = problems.clone();
            save(
                answers_dir,
                &format!("plan-answer-{attempt}.problems.txt"),
                &problems,
            )?;
            messages.push(Message::assistant(reply.content));
            messages.push(Message::user(prompt_template::fill_with(
                FIX.trim(),
                &[("problems", &problems)],
            )));
        }
        Ok(Err(PlanError::NoValidFlow {
            attempts: MAX_ATTEMPTS,
            dir: answers_dir.to_path_buf(),
            problems,
        }))
    }

    /// A usable plan made whole: the task is the user's words, and the model is asked for the
    /// command that shows the change's problem (or the question's evidence) where nothing else
    /// checks it; `conversation` ends with the plan as the model's answer.
    async fn settle(
        &self,
        mut flow: Flow,
        mut notes: Vec<String>,
        task: &str,
        named: &[RepoPath],
        conversation: Vec<Message>,
        answers_dir: &Path,
    ) -> Result<(Flow, Vec<String>), PlanError> {
        // The user's words are the task, whatever the model wrote in its `task`.
        flow.task = task.to_string();
        let checked = test_command::named_in_task(task).is_some()
            || named.iter().any(|p| is_test_file(p.as_str()));
        if reproduction::wanted(&flow, checked) {
            notes.extend(
                self.ask_command(
                    &reproduction::REPRODUCTION,
                    conversation,
                    &mut flow,
                    answers_dir,
                )
                .await?,
            );
            if let Some(tests) = self.test_commands.first() {
                notes.extend(deliverables::fall_back_to_tests(&mut flow, &tests.command));
            }
        } else if evidence::wanted(&flow) {
            notes.extend(
                self.ask_command(&evidence::EVIDENCE, conversation, &mut flow, answers_dir)
                    .await?,
            );
        }
        Ok((flow, notes))
    }

    /// Asks the model for a command that shows the task's problem and adds it to `flow` (a step
    /// before any change, a check after every change), within the roles; one sentence each
    /// for what was added, or why nothing was.
    /// The same for a question's answer (`llm::evidence`): a command whose output the answer is
    /// given to agree with. An unusable command there leaves the answer without evidence, said,
    /// rather than stopping the flow: the answer's other checks still hold.
    async fn ask_command(
        &self,
        question: &reproduction::CommandQuestion,
        conversation: Vec<Message>,
        flow: &mut Flow,
        answers_dir: &Path,
    ) -> Result<Vec<String>, PlanError> {
        let mut asked = flow.clone();
        let reply = reproduction::ask_for_command(
            self.llm,
            &self.settings.for_answer(1),
            &self.policy,
            conversation,
            &mut asked,
            question,
        )
        .await?;
        for (n, answer) in reply.answers.iter().enumerate() {
            save(
                answers_dir,
                &format!("{}-answer-{}.md", question.purpose, n + 1),
                answer,
            )?;
        }
        let mut notes = reply.notes;
        match reply.unusable {
            Some(reason) if question.purpose == reproduction::REPRODUCTION.purpose => {
                // The repository's own tests stand in for a reproduction the model could not
                // write: they must fail before the change, as the model's command would have.
                let tests = self.test_commands.first().map(|t| t.command.as_str());
                let mut tried = flow.clone();
                let stand_in = deliverables::require_tests_as_reproduction;
                let added = tests.map(|tests| stand_in(&mut tried, tests));
                match (tests, added) {
                    (Some(tests), Some(added))
                        if !added.is_empty() && self.policy.check(&tried.steps).is_none() =>
                    {
                        notes.push(format!(
                            "no usable reproduction from the model ({reason}): the repository's \
                             tests `{tests}` stand in for it"
                        ));
                        notes.extend(added);
                        asked = tried;
                    }
                    _ => {
                        return Err(PlanError::Unchecked {
                            reason,
                            dir: answers_dir.to_path_buf(),
                        });
                    }
                }
            }
            Some(reason) => return Ok(vec![format!("no {}: {reason}", question.what)]),
            None => {}
        }
        // The model said no command can show the change (or there was no budget to ask): the
        // repository's tests, if it has any, must still pass after it.
        if question.purpose == reproduction::REPRODUCTION.purpose
            && !reproduction::reproduces(&asked)
            && let Some(tests) = self.test_commands.first()
        {
            let mut tried = asked.clone();
            let added = deliverables::require_tests_after(&mut tried, &tests.command);
            match self.policy.check(&tried.steps) {
                None => {
                    notes.extend(added);
                    asked = tried;
                }
                Some(problem) => notes.push(format!(
                    "the repository's tests `{}` cannot check the change: {problem}",
                    tests.command
                )),
            }
        }
        match self.roles.apply(asked) {
            Ok(asked) => {
                *flow = asked;
                Ok(notes)
            }
            Err(problems) => Ok(vec![format!(
                "no {}: {}",
                question.what,
                problems
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            )]),
        }
    }

    /// What one answer is: a plan to run (with what validation added), the problems to send
    /// back, a plan that does not fit the task, or a refusal.
    fn judge(
        &self,
        content: &str,
        task: &str,
        named: &[RepoPath],
        (missing, files): (&[RepoPath], &[RepoPath]),
    ) -> Judged {
        let listed = |found: Vec<ocflow_model::problem::Problem>| {
            Judged::Problems(
                found
                    .iter()
                    .map(|p| format!("- {p}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        };
        let extracted = match answer::extract_json(content) {
            Ok(extracted) => extracted,
            Err(problem) => return Judged::Problems(format!("- {problem}")),
        };
        if let Some(reason) = refusal(&extracted.json) {
            return Judged::Refused(reason);
        }
        let roles = |flow: &Flow| self.roles.apply(flow.clone()).err().unwrap_or_default();
        let read = validate::parse_flow_checking(
            &extracted.json,
            Some(task),
            self.rules,
            deliverables::Order::Any,
            &roles,
        );
        let (mut flow, mut notes) = match read {
            Ok(read) => read,
            Err(found) => return listed(found),
        };
        deliverables::planned_by_model(&mut flow);
        self.name_the_test_command(&mut flow);
        if let Some(reason) = unfit(&flow, task, named) {
            return Judged::Unfit(reason);
        }
        // The task names a file to make; the flow makes one like it under another name.
        if let Some((asked, instead)) = task_files::renamed(&flow, missing, files) {
            return Judged::Unfit(format!(
                "the task names {asked}, which does not exist yet, and the flow writes {instead} \
                 instead: write the file the task names, at that path"
            ));
        }
        // The task names a file to make; the flow writes no file at all. Only the model knows
        // whether the task asks for it or only asks a question: asked once, its answer stands.
        if let Some(asked) = task_files::unwritten(&flow, missing) {
            return Judged::Ask(format!(
                "the task names {asked}, which does not exist yet, and the flow writes no file: if \
                 the task asks for {asked}, add a step that writes it there; if the task only asks \
                 a question, give the same plan again"
            ));
        }
        // What the task itself says must pass, added to a plan found fit, whether or not it
        // runs it; its commands then face the policy as the plan's own do.
        notes.extend(required_tests(&mut flow, task, named));
        if let Some(problem) = self.policy.check(&flow.steps) {
            return Judged::Problems(format!("- {problem}"));
        }
        match self.roles.apply(flow) {
            Ok(flow) => Judged::Plan(flow, notes),
            Err(found) => listed(found),
        }
    }

    /// Gives a step that runs the tests without a command the one the model was told runs
    /// them, the first of the repository's test commands: a step's view may not show what
    /// chose it (the project's own `.venv`, bound into the view only for the command), so the
    /// library must not guess again there.
    fn name_the_test_command(&self, flow: &mut Flow) {
        let Some(first) = self.test_commands.first() else {
            return;
        };
        for step in &mut flow.steps {
            let runs_tests = operations::find(&step.operation).is_some_and(|op| op.runs_tests);
            if runs_tests && !step.params.contains_key("command") {
                step.params.insert(
                    "command".into(),
                    serde_json::Value::String(first.command.clone()),
                );
            }
        }
    }

    fn first_prompt(&self, task: &str, files: &[RepoPath]) -> String {
        planner_prompt::first_prompt(&PromptParts {
            task,
            repo: &self.rules.repo,
            files,
            named: &task_files::named(task, files),
            test_commands: &self.test_commands,
            repo_map: &self
                .repo_map
                .as_ref()
                .map(|map| map(task, files))
                .unwrap_or_default(),
            past_experience: &past_experience(&self.past_experience),
            roles: self.roles,
        })
    }
}

/// The characters of the planner's first request for `task` on `repo` (its system text and
/// first prompt, the map at its budget): what an estimate of a flow's tokens starts from.
pub fn first_request_chars(repo: &Path, task: &str) -> usize {
    let files = list_files(repo, &[]);
    let roles = crate::flow::roles::Roles::default();
    let prompt = planner_prompt::first_prompt(&PromptParts {
        task,
        repo,
        files: &files,
        named: &task_files::named(task, &files),
        test_commands: &[],
        repo_map: "",
        past_experience: "",
        roles: &roles,
    });
    SYSTEM.len() + prompt.len() + planner_prompt::MAP_BUDGET
}

/// A planning failure in one clause, for the note of the plan ocflow made instead.
fn failure_in_brief(failure: &PlanError) -> String {
    let said = match failure {
        PlanError::NoValidFlow { problems, .. } => problems
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("- ")
            .to_string(),
        PlanError::Unfit { reason, .. } => reason.clone(),
        other => other.to_string(),
    };
    let brief: String = said.chars().take(160).collect();
    if brief.len() < said.len() {
        format!("{brief} …")
    } else {
        brief
    }
}

/// The memory's section as it opens a prompt: followed by a blank line, or nothing.
pub(crate) fn past_experience(section: &str) -> String {
    if section.trim().is_empty() {
        String::new()
    } else {
        format!("{}\n\n", section.trim_end())
    }
}

fn save(dir: &Path, name: &str, text: &str) -> Result<(), PlanError> {
    fs::create_dir_all(dir)
        .and_then(|()| fs::write(dir.join(name), text))
        .map_err(|source| PlanError::Io {
            dir: dir.to_path_buf(),
            source,
        })
}

/// The repository's files for the prompt: sorted, skipping `.git`, build outputs, the
/// workspace, what git ignores and secret files (their names alone can matter; their content
/// never goes out).
pub fn list_files(repo: &Path, skip: &[PathBuf]) -> Vec<RepoPath> {
    let skip = skip.to_vec();
    let root = repo.to_path_buf();
    let mut walk = ignore_rules::walk(repo);
    walk.filter_entry(move |entry| {
        let name = entry.file_name().to_str().unwrap_or("");
        let parent = entry.path().parent().unwrap_or(&root);
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        !(is_dir
            && (repo_path::is_excluded_dir(parent, name) || skip.iter().any(|s| s == entry.path())))
    });
    let mut files: Vec<RepoPath> = walk
        .build()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry.file_type().is_some_and(|t| t.is_file())
                && !is_secret(entry.file_name().to_str().unwrap_or(""))
        })
        .filter_map(|entry| RepoPath::from_walk(repo, entry.path()))
        .collect();
    files.sort();
    files
}

/// File names that hold credentials by convention.
pub(crate) fn is_secret(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == ".env"
        || lower.starts_with(".env.")
        || lower == ".netrc"
        || lower.starts_with("id_rsa")
        || lower.starts_with("id_ed25519")
        || lower.starts_with("id_ecdsa")
        || lower.starts_with("credentials")
        || [".pem", ".key", ".p12", ".pfx", ".keystore", ".jks"]
            .iter()
            .any(|ext| lower.ends_with(ext))
}

/// Why a valid flow still does not fit the task, if it does not: it is the prompt's own
/// example, it holds the prompt's placeholders, or it touches none of the files the task names.
fn unfit(flow: &Flow, task: &str, named: &[RepoPath]) -> Option<String> {
    let mut steps = serde_json::to_value(&flow.steps).ok()?;
    // Roles are given by ocflow where the model left none: not part of what it copied.
    if let Some(list) = steps.as_array_mut() {
        for step in list.iter_mut().filter_map(serde_json::Value::as_object_mut) {
            step.remove("role");
        }
    }
    if example_steps().is_some_and(|example| example == steps) {
        return Some(
            "this is the example from the instructions, not a plan for this task: plan the \
             task itself, on this repository's files"
                .into(),
        );
    }
    let text = steps.to_string();
    if let Some(placeholder) = ["<the task>", "<task>", "<file>", "\"...\"", "TODO: fill"]
        .iter()
        .find(|p| text.contains(*p))
    {
        return Some(format!(
            "the flow holds the placeholder {placeholder} from the instructions; write the real \
             values"
        ));
    }
    let touches = |path: &RepoPath| {
        let name = path.as_str().rsplit('/').next().unwrap_or(path.as_str());
        text.contains(path.as_str()) || text.contains(name)
    };
    if !named.is_empty() && !named.iter().any(touches) {
        let names: Vec<&str> = named.iter().map(RepoPath::as_str).collect();
        // A test the task names is how the fault shows, rarely where it is: never an invitation
        // to edit the test until it passes.
        return Some(if named.iter().all(|p| is_test_file(p.as_str())) {
            format!(
                "the flow touches none of the files the task names ({}), which are tests: read \
                 them to find the code they exercise, change that code, and run them after the \
                 change; change a test itself only if the task asks for it",
                names.join(", ")
            )
        } else {
            let file = named
                .iter()
                .find(|p| !is_test_file(p.as_str()))
                .unwrap_or(&named[0]);
            format!(
                "the flow touches none of the files the task names ({}): plan its steps on them. \
                 To change {file}, for example: {}; to answer a question about it: {}; when no \
                 change to this repository can do the task: {{\"refuse\": \"why\"}}",
                names.join(", "),
                plan_shapes::hint(file, Shape::Change, task),
                plan_shapes::hint(file, Shape::Question, task)
            )
        });
    }
    // A command may change files, which only its run shows: such a plan is judged at its end.
    let runs_commands = flow
        .steps
        .iter()
        .any(|s| operations::find(&s.operation).is_some_and(|op| op.runs_commands));
    if !runs_commands && flow.deliverables.as_ref().is_none_or(|d| d.is_empty()) {
        return Some(DELIVERS_NOTHING.into());
    }
    None
}

/// What the task itself says must pass, made a deliverable of the flow: the command it names
/// to run its tests with, else each test file it names (by the runners' naming) that the flow
/// does not delete, unless the flow only answers a question. One sentence each.
fn required_tests(flow: &mut Flow, task: &str, named: &[RepoPath]) -> Vec<String> {
    if let Some(command) = test_command::named_in_task(task) {
        return deliverables::require_command(flow, &command);
    }
    let answers_only = flow
        .deliverables
        .as_ref()
        .is_some_and(|d| d.answer.is_some() && d.files.is_empty());
    if answers_only {
        return Vec::new();
    }
    let deleted = |path: &str| {
        flow.steps.iter().any(|s| {
            operations::find(&s.operation).is_some_and(|op| {
                op.deletes
                    && op
                        .writes
                        .iter()
                        .any(|p| s.params.get(*p).and_then(serde_json::Value::as_str) == Some(path))
            })
        })
    };
    let commands: Vec<String> = named
        .iter()
        .map(RepoPath::as_str)
        .filter(|path| is_test_file(path) && !deleted(path))
        .filter_map(test_command::for_test_file)
        .collect();
    let mut notes = Vec::new();
    for command in commands {
        notes.extend(deliverables::require_command(flow, &command));
    }
    notes
}

/// Why a plan that delivers nothing is asked again: a plan of reads alone does no task.
const DELIVERS_NOTHING: &str = "the plan delivers nothing: it changes no file, runs no test after \
    a change and gives no answer. Say in `deliverables` what the task needs done (the `files` to \
    change, the `commands` that must pass, or the question to `answer`, with an analyze_code step \
    marked \"final_answer\": true) and plan the steps that deliver it; or, when no change to this \
    repository can do the task, answer {\"refuse\": \"why\"}";

/// The reason of a refusal: the flow's `refuse` (`{"steps": […], "refuse": "why"}`), or an
/// answer that is a refusal alone (`{"refuse": "why"}`, `{"refuse": true, "reason": "why"}`).
fn refusal(json: &str) -> Option<String> {
    let serde_json::Value::Object(answer) = serde_json::from_str(json).ok()? else {
        return None;
    };
    let reason = match answer.get("refuse")? {
        serde_json::Value::String(reason) => reason.clone(),
        serde_json::Value::Bool(true) => answer
            .get("reason")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("no reason given")
            .to_string(),
        _ => return None,
    };
    Some(reason.trim().to_string()).filter(|r| !r.is_empty())
}

/// The steps of the system prompt's example answer, as a parsed flow serialises them.
fn example_steps() -> Option<serde_json::Value> {
    let at = SYSTEM.find("Example answer")?;
    let extracted = answer::extract_json(&SYSTEM[at..]).ok()?;
    let mut example: serde_json::Value = serde_json::from_str(&extracted.json).ok()?;
    let steps: Vec<ocflow_model::flow::Step> =
        serde_json::from_value(example.get_mut("steps")?.take()).ok()?;
    serde_json::to_value(&steps).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompts_example_is_recognised() {
        assert!(example_steps().is_some_and(|s| s.as_array().is_some_and(|a| a.len() == 2)));
    }

    #[test]
    fn secrets_are_recognised() {
        for name in [
            ".env",
            ".env.local",
            "id_rsa",
            "id_ed25519.pub",
            "server.pem",
            "tls.key",
            "credentials.json",
        ] {
            assert!(is_secret(name), "{name}");
        }
        assert!(!is_secret("utils.py"));
    }
}
